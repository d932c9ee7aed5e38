//! The Fig 5-style PNG: grouped bars of mean goodput per (scenario, flows), one bar per
//! congestion-control mode, min–max whiskers, the scenario's bound as a dashed line and the
//! paper's value as a black diamond.
//!
//! Text is drawn with plotters' `ab_glyph` backend from a TTF read at run time
//! ([`load_font`]), so no system font library is linked. Must be called before drawing.

use std::path::Path;

use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::FontStyle;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{Cc, Group, Report, Scenario, paper};

/// Picture width, pixels.
pub const WIDTH: u32 = 1000;
/// Picture height, pixels.
pub const HEIGHT: u32 = 560;
/// The font used when `--font` is not given (Debian/Ubuntu package `fonts-dejavu-core`).
pub const DEFAULT_FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
/// The family name the font is registered under.
const FAMILY: &str = "sans-serif";

/// Bar colours per mode: red and orange as the paper's Fig 5 (no CC, Algorithm 1), blue ours.
fn colour(cc: Cc) -> RGBColor {
    match cc {
        Cc::Fixed => RGBColor(0xd6, 0x27, 0x28),
        Cc::Faithful => RGBColor(0xff, 0x7f, 0x0e),
        Cc::Improved => RGBColor(0x1f, 0x77, 0xb4),
    }
}

/// Reads the TTF at `path` and registers it for all chart text.
///
/// # Errors
/// The file cannot be read or is not a TrueType/OpenType font.
pub fn load_font(path: &Path) -> Result<(), String> {
    let bytes = std::fs::read(path).map_err(|e| {
        format!(
            "font {}: {e} (install fonts-dejavu-core or pass --font PATH)",
            path.display()
        )
    })?;
    // plotters keeps registered fonts in a process-wide table and wants `&'static` bytes: one
    // font file per process, leaked on purpose.
    let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
    plotters::style::register_font(FAMILY, FontStyle::Normal, bytes)
        .map_err(|_| format!("font {}: not a TrueType/OpenType font", path.display()))
}

/// Draws the chart into a PNG file at `path`.
///
/// # Errors
/// Drawing fails (no font loaded) or the file cannot be written.
pub fn render_png(report: &Report, path: &Path) -> Result<(), String> {
    let root = BitMapBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area();
    draw(report, &root)?;
    root.present()
        .map_err(|e| format!("chart {}: {e}", path.display()))
}

/// Draws the chart into an RGB buffer (`WIDTH × HEIGHT × 3` bytes).
///
/// # Errors
/// Drawing fails (no font loaded).
pub fn render_rgb(report: &Report) -> Result<Vec<u8>, String> {
    let mut buf = vec![0; WIDTH as usize * HEIGHT as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut buf, (WIDTH, HEIGHT)).into_drawing_area();
        draw(report, &root)?;
        root.present().map_err(|e| format!("chart: {e}"))?;
    }
    Ok(buf)
}

/// The x axis: one slot per (scenario, flows) that has runs, in report order.
fn slots(report: &Report) -> Vec<(Scenario, u32)> {
    let mut slots: Vec<(Scenario, u32)> = report
        .groups
        .iter()
        .map(|g| (g.scenario, g.flows))
        .collect();
    slots.dedup();
    slots
}

fn slot_label(scenario: Scenario, flows: u32) -> String {
    let s = match scenario {
        Scenario::NoCongestion => "no congestion",
        Scenario::Uni => "unidirectional",
        Scenario::Bi => "bidirectional",
    };
    let f = if flows == 1 { "flow" } else { "flows" };
    format!("{s}, {flows} {f}")
}

/// The highest value the chart must show, Mbit/s.
fn y_top(report: &Report) -> f64 {
    let ours = report.groups.iter().flat_map(|g| {
        [g.goodput.map(|s| s.max), g.bound.map(|s| s.mean)]
            .into_iter()
            .flatten()
            .map(|kbps| kbps / 1000.0)
    });
    let papers = slots(report).into_iter().flat_map(|(s, f)| {
        Cc::ALL.into_iter().filter_map(move |cc| {
            let p = paper(s, cc, f).goodput_mbps?;
            Some(match p {
                super::Spread::Sd(mean, _) => mean,
                super::Spread::Range(_, _, max) => max,
            })
        })
    });
    let top = ours.chain(papers).fold(0.0, f64::max);
    // Headroom for the value labels and the legend.
    if top.is_finite() && top > 0.0 {
        top * 1.3
    } else {
        1.0
    }
}

fn draw<DB: DrawingBackend>(report: &Report, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| format!("chart: {e}");
    let slots = slots(report);
    let modes = report.modes();
    let n = slots.len().max(1) as f64;
    let per = modes.len().max(1) as f64;
    // Each slot spans [i, i + 1): bars fill the middle 80 %.
    let bar_w = 0.8 / per;
    let bar_x = |slot: usize, k: usize| slot as f64 + 0.1 + k as f64 * bar_w;

    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(root)
        .caption(
            "TCP goodput host A → host B under congestion (seed 003 Fig 5 setup)",
            (FAMILY, 22),
        )
        .margin(12)
        .x_label_area_size(48)
        .y_label_area_size(56)
        .build_cartesian_2d(0.0..n, 0.0..y_top(report))
        .map_err(err)?;
    // The slot names are drawn below the axis by hand: plotters' x labels sit at "nice"
    // numbers, not at slot centres.
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc("goodput (Mbit/s)")
        .x_desc("scenario, parallel iperf3 TCP flows")
        .label_style((FAMILY, 14))
        .axis_desc_style((FAMILY, 15))
        .light_line_style(WHITE.mix(0.0))
        .bold_line_style(BLACK.mix(0.12))
        .draw()
        .map_err(err)?;

    let label_style = (FAMILY, 14)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Center, VPos::Top));
    for (i, &(s, f)) in slots.iter().enumerate() {
        let (x, y) = chart.backend_coord(&(i as f64 + 0.5, 0.0));
        root.draw(&Text::new(
            slot_label(s, f),
            (x, y + 8),
            label_style.clone(),
        ))
        .map_err(err)?;
    }

    let groups_of = |cc: Cc| -> Vec<(usize, usize, &Group)> {
        let k = modes.iter().position(|&m| m == cc).unwrap_or(0);
        slots
            .iter()
            .enumerate()
            .filter_map(|(i, &(s, f))| report.group(s, cc, f).map(|g| (i, k, g)))
            .collect()
    };

    // Bars, one series per mode (for the legend).
    for &cc in &modes {
        let c = colour(cc);
        let bars = groups_of(cc).into_iter().filter_map(|(i, k, g)| {
            let mean = g.goodput?.mean / 1000.0;
            let x0 = bar_x(i, k) + bar_w * 0.06;
            let x1 = bar_x(i, k) + bar_w * 0.94;
            Some(Rectangle::new([(x0, 0.0), (x1, mean)], c.filled()))
        });
        chart
            .draw_series(bars)
            .map_err(err)?
            .label(cc.label())
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], c.filled()));
    }

    // Whiskers, value labels, and `fail` where no repetition measured goodput.
    for &cc in &modes {
        for (i, k, g) in groups_of(cc) {
            let mid = bar_x(i, k) + bar_w / 2.0;
            let cap = bar_w * 0.18;
            let Some(s) = g.goodput else {
                chart
                    .draw_series([Text::new(
                        "fail",
                        (bar_x(i, k) + bar_w * 0.1, y_top(report) * 0.02),
                        (FAMILY, 13).into_font().color(&colour(cc)),
                    )])
                    .map_err(err)?;
                continue;
            };
            let (lo, hi) = (s.min / 1000.0, s.max / 1000.0);
            let style = BLACK.stroke_width(1);
            chart
                .draw_series([
                    PathElement::new(vec![(mid, lo), (mid, hi)], style),
                    PathElement::new(vec![(mid - cap, lo), (mid + cap, lo)], style),
                    PathElement::new(vec![(mid - cap, hi), (mid + cap, hi)], style),
                ])
                .map_err(err)?;
            // The mean in white at the foot of the bar, or above the whisker if the bar is too
            // short for it (a label above a tall bar would collide with the bound line).
            let text = format!("{:.2}", s.mean / 1000.0);
            let (_, foot) = chart.backend_coord(&(mid, 0.0));
            let (_, top) = chart.backend_coord(&(mid, s.mean / 1000.0));
            let centred = |c: &RGBColor| {
                (FAMILY, 12)
                    .into_font()
                    .color(c)
                    .pos(Pos::new(HPos::Center, VPos::Bottom))
            };
            let label = if foot - top >= 22 {
                EmptyElement::at((mid, 0.0)) + Text::new(text, (0, -5), centred(&WHITE))
            } else {
                EmptyElement::at((mid, hi)) + Text::new(text, (0, -5), centred(&BLACK))
            };
            chart.draw_series([label]).map_err(err)?;
        }
    }

    // The bound of each slot (mean over its groups; constant per scenario in practice).
    let grey = BLACK.mix(0.6).stroke_width(2);
    let mut bounds = Vec::new();
    for (i, &(s, f)) in slots.iter().enumerate() {
        let b: Vec<f64> = report
            .groups
            .iter()
            .filter(|g| g.scenario == s && g.flows == f)
            .filter_map(|g| g.bound.map(|b| b.mean / 1000.0))
            .collect();
        if !b.is_empty() {
            let y = b.iter().sum::<f64>() / b.len() as f64;
            bounds.push(DashedPathElement::new(
                vec![(i as f64 + 0.04, y), (i as f64 + 0.96, y)],
                7,
                5,
                grey,
            ));
        }
    }
    chart
        .draw_series(bounds)
        .map_err(err)?
        .label("bound (ideal congestion control)")
        .legend(move |(x, y)| DashedPathElement::new(vec![(x, y), (x + 14, y)], 4, 3, grey));

    // The paper's values, at the bar of the matching mode (its CC = our `faithful`).
    let mut marks = Vec::new();
    for (i, &(s, f)) in slots.iter().enumerate() {
        for cc in Cc::ALL {
            let Some(p) = paper(s, cc, f).goodput_mbps else {
                continue;
            };
            let x = match modes.iter().position(|&m| m == cc) {
                Some(k) => bar_x(i, k) + bar_w / 2.0,
                None => i as f64 + 0.5,
            };
            marks.push(EmptyElement::at((x, p.mean())) + diamond(6));
        }
    }
    chart
        .draw_series(marks)
        .map_err(err)?
        .label("paper (seed 003 §V-B)")
        .legend(|(x, y)| EmptyElement::at((x + 7, y)) + diamond(6));

    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .label_font((FAMILY, 13))
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK.mix(0.4))
        .draw()
        .map_err(err)?;

    root.draw(&Text::new(
        "bars: mean over repetitions, whiskers: min–max",
        (14, HEIGHT as i32 - 18),
        (FAMILY, 12).into_font().color(&BLACK.mix(0.7)),
    ))
    .map_err(err)?;
    Ok(())
}

/// A black diamond of half-diagonal `r` pixels, centred on its anchor.
fn diamond(r: i32) -> Polygon<(i32, i32)> {
    Polygon::new(vec![(0, -r), (r, 0), (0, r), (-r, 0)], BLACK.filled())
}

#[cfg(test)]
mod tests {
    use std::sync::Once;

    use super::super::{Results, parse};
    use super::*;

    fn font() {
        static ONCE: Once = Once::new();
        ONCE.call_once(|| {
            // A fresh machine may lack the font: install it the way the root integration tests
            // install their tools (testbed/install-deps.sh, idempotent).
            if !Path::new(DEFAULT_FONT).exists() {
                let script =
                    Path::new(env!("CARGO_MANIFEST_DIR")).join("../testbed/install-deps.sh");
                let ok = std::process::Command::new(&script)
                    .status()
                    .is_ok_and(|s| s.success());
                assert!(
                    ok,
                    "{} failed; the chart test needs {DEFAULT_FONT}",
                    script.display()
                );
            }
            load_font(Path::new(DEFAULT_FONT))
                .unwrap_or_else(|e| panic!("the chart test needs a TTF: {e}"));
        });
    }

    fn count(buf: &[u8], c: RGBColor) -> usize {
        buf.chunks_exact(3)
            .filter(|p| *p == [c.0, c.1, c.2])
            .count()
    }

    #[test]
    fn sample_chart_has_every_bar() {
        font();
        let report = Report::new(&parse(include_str!("sample.tsv")).unwrap());
        let buf = render_rgb(&report).unwrap();
        for cc in Cc::ALL {
            assert!(count(&buf, colour(cc)) > 2000, "{cc:?} bars missing");
        }
        assert!(count(&buf, BLACK) > 500, "no text, whiskers or diamonds");
    }

    #[test]
    fn odd_inputs_draw_without_panicking() {
        font();
        // Only failed runs: no bars, no y range from the data.
        let text = "uni\tfixed\t1\t1\tnan\tnan\tnan\tnan\tnan\tnan\n";
        render_rgb(&Report::new(&parse(text).unwrap())).unwrap();
        // One mode, a flow count the paper does not have, zeros.
        let text = "bi\timproved\t3\t1\t0\t0\t0\t0\t0\t0\n";
        render_rgb(&Report::new(&parse(text).unwrap())).unwrap();
        let empty = Report::new(&Results::default());
        render_rgb(&empty).unwrap();
    }
}
