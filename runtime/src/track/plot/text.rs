//! The plots' text: strings rasterized from the font embedded in the crate (DejaVu Sans cut to
//! Latin-1, `fonts/DejaVuSans-plots.ttf`, its licence beside it) straight into the RGB buffer, so
//! no system font is read and the image does not depend on the fonts a machine has.

use ab_glyph::{Font, FontRef, GlyphId, PxScale, ScaleFont, point};

/// The embedded font (about 31 KB); `bench/tools/plot-font.sh` regenerates it.
static FONT: &[u8] = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/fonts/DejaVuSans-plots.ttf"));

/// Where a text's box sits along one direction, relative to its anchor.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Align {
    /// The box starts at the anchor (its left side, or its top).
    Start,
    /// The box is centred on the anchor.
    Center,
    /// The box ends at the anchor (its right side, or its bottom).
    End,
}

impl Align {
    /// How far before the anchor a box of `length` starts.
    fn offset(self, length: f32) -> f32 {
        match self {
            Align::Start => 0.0,
            Align::Center => length / 2.0,
            Align::End => length,
        }
    }
}

/// One string to draw.
#[derive(Debug, Clone)]
pub(crate) struct Label {
    /// The string.
    pub text: String,
    /// The anchor, in pixels.
    pub at: (i32, i32),
    /// The height of a line (ascent to descent), in pixels.
    pub size: f32,
    /// Where the box sits along the text's direction, and across it.
    pub align: (Align, Align),
    /// Turned a quarter anticlockwise (read from bottom to top), as a y axis's label.
    pub vertical: bool,
    /// Its colour (RGB).
    pub color: [u8; 3],
}

/// An RGB image being drawn into.
pub(crate) struct Canvas<'a> {
    /// The pixels, row by row, 3 bytes each.
    pub pixels: &'a mut [u8],
    /// Its width and height.
    pub size: (u32, u32),
}

impl Canvas<'_> {
    /// Blend `color` over the pixel at `(x, y)` with coverage `c` (0 to 1); outside, nothing.
    fn blend(&mut self, (x, y): (i32, i32), color: [u8; 3], c: f32) {
        let (w, h) = self.size;
        if x < 0 || y < 0 || x >= w as i32 || y >= h as i32 {
            return;
        }
        let i = (y as usize * w as usize + x as usize) * 3;
        let c = c.clamp(0.0, 1.0);
        for (p, &f) in self.pixels[i..i + 3].iter_mut().zip(&color) {
            *p = (f32::from(*p) + (f32::from(f) - f32::from(*p)) * c).round() as u8;
        }
    }

    /// Draw `label`.
    pub fn draw(&mut self, label: &Label) -> Result<(), String> {
        let font = font()?;
        let scale = PxScale::from(label.size);
        let scaled = font.as_scaled(scale);
        let (ids, pens, width) = line(&font, &label.text, label.size);
        let (along, across) = label.align;
        let dx = -along.offset(width);
        let top = -across.offset(scaled.ascent() - scaled.descent());
        for (&id, &pen) in ids.iter().zip(&pens) {
            let glyph = id.with_scale_and_position(scale, point(dx + pen, top + scaled.ascent()));
            let Some(outline) = font.outline_glyph(glyph) else { continue };
            let min = outline.px_bounds().min;
            let (x0, y0) = (min.x as i32, min.y as i32);
            outline.draw(|gx, gy, c| {
                // (lx, ly): in the text's own frame, x along the line, y down across it.
                let (lx, ly) = (x0 + gx as i32, y0 + gy as i32);
                let (ax, ay) = label.at;
                let at = if label.vertical { (ax + ly, ay - lx) } else { (ax + lx, ay + ly) };
                self.blend(at, label.color, c);
            });
        }
        Ok(())
    }
}

/// The embedded font.
fn font() -> Result<FontRef<'static>, String> {
    FontRef::try_from_slice(FONT).map_err(|e| format!("the embedded font: {e}"))
}

/// The glyphs of `text` at `size`, each one's pen position along the line (kerned), and the
/// line's width.
fn line(font: &FontRef<'_>, text: &str, size: f32) -> (Vec<GlyphId>, Vec<f32>, f32) {
    let scaled = font.as_scaled(PxScale::from(size));
    let ids: Vec<GlyphId> = text.chars().map(|c| font.glyph_id(c)).collect();
    let mut pens = Vec::with_capacity(ids.len());
    let mut pen = 0.0;
    for (k, &id) in ids.iter().enumerate() {
        if k > 0 {
            pen += scaled.kern(ids[k - 1], id);
        }
        pens.push(pen);
        pen += scaled.h_advance(id);
    }
    (ids, pens, pen)
}

/// The width of `text` at `size`, in pixels.
pub(crate) fn width(text: &str, size: f32) -> Result<f32, String> {
    Ok(line(&font()?, text, size).2)
}
