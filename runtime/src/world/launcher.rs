//! What the launcher does to the ranks when the job is stopped, and the warning a chief gives when
//! its checkpoints take longer than the launcher allows.
//!
//! Open MPI's `mpirun` (4.x), told to stop (a Ctrl-C on its terminal, a SIGINT or SIGTERM to it),
//! does not forward the signal: it sends every rank SIGCONT, waits `odls_base_sigkill_timeout`
//! seconds (1 unless set), sends SIGTERM, waits as long again, then SIGKILL. The ranks live in
//! process groups of their own, so the terminal's Ctrl-C reaches `mpirun` alone. A rank stops at
//! the SIGTERM, so the checkpoint of a Ctrl-C has one timeout to be written: a chief whose
//! checkpoint takes longer says so once, with the setting that fixes it.

use std::time::Duration;

/// How long the launcher leaves a rank between SIGTERM and SIGKILL, when this process is a rank of
/// Open MPI's `mpirun` (the variables it sets for its ranks say so): `odls_base_sigkill_timeout`,
/// which `mpirun --mca odls_base_sigkill_timeout N` or the environment variable
/// `OMPI_MCA_odls_base_sigkill_timeout` passes on to the ranks. The MPI transport's
/// `kill_grace`.
#[cfg(feature = "mpi")]
pub(crate) fn kill_grace() -> Option<Duration> {
    grace_from(
        std::env::var("OMPI_COMM_WORLD_SIZE").ok().as_deref(),
        std::env::var("OMPI_MCA_odls_base_sigkill_timeout").ok().as_deref(),
    )
}

#[cfg(any(feature = "mpi", test))]
fn grace_from(world_size: Option<&str>, timeout: Option<&str>) -> Option<Duration> {
    world_size?;
    let seconds = timeout.and_then(|t| t.trim().parse::<u64>().ok()).unwrap_or(1);
    Some(Duration::from_secs(seconds))
}

/// The warning for a checkpoint that took `took` when the launcher kills `grace` after SIGTERM
/// (`None`: it fits, with room for the step boundary and the ranks' agreement).
pub(crate) fn slow_checkpoint(took: Duration, grace: Duration) -> Option<String> {
    let needed = took + took / 2 + Duration::from_millis(500);
    if needed <= grace {
        return None;
    }
    let suggested = (took.as_secs_f64() * 2.0).ceil() as u64 + 2;
    Some(format!(
        "writing a checkpoint took {:.1} s, but mpirun kills the ranks {} s after it passes on a \
         Ctrl-C (odls_base_sigkill_timeout): the checkpoint of an interrupt would be cut short and \
         the previous one would stay the latest. Start mpirun with `--mca odls_base_sigkill_timeout \
         {suggested}` (Ctrl-C then stops the ranks {suggested} s after it is pressed and leaves them \
         {suggested} s to write)",
        took.as_secs_f64(),
        grace.as_secs()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grace_is_known_only_under_mpirun_and_is_1_s_unless_set() {
        assert_eq!(grace_from(None, Some("30")), None);
        assert_eq!(grace_from(Some("2"), None), Some(Duration::from_secs(1)));
        assert_eq!(grace_from(Some("2"), Some("30")), Some(Duration::from_secs(30)));
        assert_eq!(grace_from(Some("2"), Some("soon")), Some(Duration::from_secs(1)));
    }

    #[test]
    fn a_checkpoint_that_does_not_fit_the_grace_names_a_timeout_that_does() {
        let secs = Duration::from_secs_f64;
        assert_eq!(slow_checkpoint(secs(0.2), secs(1.0)), None);
        let warning = slow_checkpoint(secs(5.0), secs(1.0)).unwrap();
        assert!(warning.contains("took 5.0 s") && warning.contains("1 s after"), "{warning}");
        assert!(warning.contains("--mca odls_base_sigkill_timeout 12"), "{warning}");
        assert_eq!(slow_checkpoint(secs(5.0), secs(12.0)), None, "the suggestion must fit");
        assert!(slow_checkpoint(secs(5.0), secs(7.0)).is_some());
    }
}
