//! The terminal while the dashboard holds it: raw mode, the alternate screen, the cursor hidden;
//! put back on every way out: the end of training (an error included), a panic (through a panic
//! hook that restores first and then chains to the previous one; the screen thread then draws no
//! more), a second Ctrl-C key, and a second SIGINT or SIGTERM from outside, whose immediate exit
//! in the signal handler puts back the terminal's settings saved here before raw mode and writes
//! [`LEAVE`] (`crate::signal::restore_terminal_on_exit`). The screen thread draws and reads the
//! keys, off the step's path. While a prompt is open on the terminal (`InjectShell`'s, through
//! `crate::signal::open_prompt`) it steps aside: the terminal put back, no frame drawn, no key
//! read; it takes the terminal again when the prompt closes.

use std::io::{IsTerminal, Write};
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::{Arc, Mutex, Once, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::buffer::Buffer;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::crossterm::{cursor, execute, terminal};

use super::screen::{View, render, text_of};
use super::state::{Shared, Status};
use crate::signal::TerminalHold;

/// How often the screen is drawn, and the step outputs fetched.
pub(super) const REFRESH: Duration = Duration::from_millis(250);
/// How often the whole screen is repainted (a line another part of the program printed on the
/// screen goes away).
const REPAINT: Duration = Duration::from_secs(2);

/// What leaves the alternate screen and shows the cursor (as crossterm's `LeaveAlternateScreen`
/// and `cursor::Show` do): written by the signal handler that exits at a second signal.
const LEAVE: &[u8] = b"\x1b[?1049l\x1b[?25h";

/// Whether a dashboard holds the terminal now.
static OWNED: AtomicBool = AtomicBool::new(false);
/// Held while a frame is written, so that the panic hook does not restore the terminal in the
/// middle of one.
static WRITING: Mutex<()> = Mutex::new(());
static HOOK: Once = Once::new();

/// Whether the dashboard can draw: stderr is a terminal.
pub(super) fn available() -> bool {
    std::io::stderr().is_terminal()
}

/// Take the terminal: raw mode, the alternate screen, no cursor.
pub(super) fn enter() -> std::io::Result<()> {
    install_panic_hook();
    // Its settings before raw mode, for the signal handler's exit.
    crate::signal::restore_terminal_on_exit(STDERR, LEAVE)?;
    if let Err(e) = terminal::enable_raw_mode() {
        crate::signal::forget_terminal();
        return Err(e);
    }
    OWNED.store(true, Relaxed);
    if let Err(e) = execute!(std::io::stderr(), terminal::EnterAlternateScreen, cursor::Hide) {
        restore();
        return Err(e);
    }
    Ok(())
}

/// stderr's descriptor, the terminal the dashboard draws on.
const STDERR: i32 = 2;

/// Put the terminal back as it was, once (any later call does nothing).
pub(super) fn restore() {
    if OWNED.swap(false, Relaxed) {
        let _ = terminal::disable_raw_mode();
        let _ = execute!(std::io::stderr(), terminal::LeaveAlternateScreen, cursor::Show);
        crate::signal::forget_terminal();
    }
}

/// Once per process: a panic restores the terminal, then reports as before (the previous hook),
/// so that its message is seen on the normal screen.
fn install_panic_hook() {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if OWNED.load(Relaxed) {
                // Wait a little for a frame being written; go on if it never ends (a panic
                // while writing one).
                let deadline = Instant::now() + Duration::from_millis(300);
                let _guard = loop {
                    match WRITING.try_lock() {
                        Ok(guard) => break Some(guard),
                        Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
                        Err(_) => break None,
                    }
                };
                restore();
            }
            previous(info);
        }));
    });
}

/// Start the screen thread: it draws `shared` every [`REFRESH`], reads the keys (`q` and the
/// first Ctrl-C call `stop`, a second Ctrl-C restores the terminal and exits with status 130),
/// and once the run is over (`shared.closing`) and its writer has written the last values
/// (`shared.written`) draws the last frame, puts the terminal back and leaves that frame's text
/// on it. If the terminal was put back meanwhile (by the panic hook), it ends drawing nothing
/// more. `shared.drawing` is cleared when it ends, however it ends.
pub(super) fn spawn(shared: Arc<Shared>, stop: Box<dyn Fn() + Send>) -> std::io::Result<JoinHandle<()>> {
    /// Clears `drawing` when the thread ends.
    struct Ended(Arc<Shared>);
    impl Drop for Ended {
        fn drop(&mut self) {
            self.0.drawing.store(false, Release);
        }
    }
    shared.drawing.store(true, Relaxed);
    // A thread that cannot start drops the closure, and `Ended` in it: `drawing` is cleared; and
    // the hold on the terminal, counted in before a prompt can open.
    let ended = Ended(shared.clone());
    let hold = crate::signal::hold_terminal();
    std::thread::Builder::new().name("stoker-dashboard".into()).spawn(move || {
        let _ended = ended;
        let last = match run(&shared, &hold, stop.as_ref()) {
            Ok(Some(last)) => last,
            Ok(None) => return,
            Err(e) => {
                restore();
                crate::logging::warn!("the dashboard stopped drawing: {e}");
                return;
            }
        };
        let _guard = WRITING.lock().unwrap_or_else(PoisonError::into_inner);
        if OWNED.load(Relaxed) {
            restore();
            let mut err = std::io::stderr().lock();
            let _ = err.write_all(last.as_bytes());
            let _ = err.flush();
        }
    })
}

/// Clear the screen and have the next frame drawn whole. (`Terminal::clear` would ask the
/// terminal where its cursor is, which a terminal that does not answer makes an error; resizing a
/// full-screen viewport to its size asks nothing.)
fn repaint(screen: &mut Terminal<CrosstermBackend<std::io::Stderr>>) -> std::io::Result<()> {
    let size = screen.size()?;
    screen.resize(ratatui::layout::Rect::new(0, 0, size.width, size.height))
}

/// A prompt is open on the terminal: put the terminal back for it and wait until it closes, then
/// take the terminal again (`true`). `false`: the terminal was put back by someone else (the panic
/// hook), or the run closed meanwhile; the screen thread then ends, drawing nothing more.
fn step_aside(hold: &TerminalHold, shared: &Shared) -> std::io::Result<bool> {
    {
        let _guard = WRITING.lock().unwrap_or_else(PoisonError::into_inner);
        if !OWNED.load(Relaxed) {
            return Ok(false);
        }
        restore();
    }
    if !hold.step_aside(&|| shared.closing.load(Acquire)) {
        return Ok(false);
    }
    enter()?;
    Ok(true)
}

/// The screen thread's loop; returns the text of the last frame, `None` when the terminal was
/// put back by someone else (the panic hook).
fn run(shared: &Shared, hold: &TerminalHold, stop: &dyn Fn()) -> std::io::Result<Option<String>> {
    let mut screen = Terminal::new(CrosstermBackend::new(std::io::stderr()))?;
    repaint(&mut screen)?;
    // When the next frame is due, and when the screen was last painted whole.
    let (mut due, mut repainted) = (Instant::now(), Instant::now());
    let mut ctrl_c = false;
    while !(shared.closing.load(Acquire) && shared.written.load(Acquire)) {
        if !OWNED.load(Relaxed) {
            return Ok(None);
        }
        if hold.prompt_open() {
            if !step_aside(hold, shared)? {
                return Ok(None);
            }
            repaint(&mut screen)?;
            (due, repainted) = (Instant::now(), Instant::now());
            continue;
        }
        let wait = due.saturating_duration_since(Instant::now()).min(Duration::from_millis(50));
        if event::poll(wait)? {
            match event::read()? {
                Event::Key(key) if key.kind != KeyEventKind::Release => {
                    let is_ctrl_c =
                        key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL);
                    if is_ctrl_c && ctrl_c {
                        restore();
                        let _ = writeln!(std::io::stderr(), "stoker: a second Ctrl-C: exiting at once");
                        crate::signal::kill_helpers();
                        std::process::exit(130);
                    }
                    if is_ctrl_c || matches!(key.code, KeyCode::Char('q') | KeyCode::Char('Q')) {
                        ctrl_c |= is_ctrl_c;
                        stop();
                        shared.change_status(Status::Running, Status::Stopping);
                        shared.change_status(Status::Validating, Status::Stopping);
                    }
                    due = Instant::now();
                }
                Event::Resize(..) => {
                    screen.autoresize()?;
                    due = Instant::now();
                }
                _ => {}
            }
        }
        if Instant::now() >= due {
            shared.want_fetch.store(true, Relaxed);
            let _guard = WRITING.lock().unwrap_or_else(PoisonError::into_inner);
            if !OWNED.load(Relaxed) {
                return Ok(None);
            }
            if repainted.elapsed() >= REPAINT {
                repaint(&mut screen)?;
                repainted = Instant::now();
            }
            let view = View::of(shared);
            screen.draw(|frame| render(&view, frame.area(), frame.buffer_mut()))?;
            due = Instant::now() + REFRESH;
        }
    }
    let view = View::of(shared);
    {
        let _guard = WRITING.lock().unwrap_or_else(PoisonError::into_inner);
        if !OWNED.load(Relaxed) {
            return Ok(None);
        }
        screen.draw(|frame| render(&view, frame.area(), frame.buffer_mut()))?;
    }
    let size = screen.size()?;
    // What stays on the normal screen: the last frame, at most 30 rows high.
    let area = ratatui::layout::Rect::new(0, 0, size.width, size.height.min(30));
    let mut buf = Buffer::empty(area);
    render(&view, area, &mut buf);
    Ok(Some(text_of(&buf)))
}
