//! `mistralrs-hlg curve`: the curve g₁(z) of each toe shape, as a table (the SVG figure
//! is `mistralrs-hlg-eval curve`, in the evaluation's crate).

use anyhow::bail;
use clap::Args;
use mistralrs_hlg::server::HlgFlags;
use mistralrs_hlg::{HlgConfig, ToeShape};

#[derive(Args)]
pub struct CurveArgs {
    #[command(flatten)]
    hlg: HlgFlags,
    /// Smallest z (nats from the pivot).
    #[arg(long, default_value_t = -24.0, allow_hyphen_values = true)]
    from: f64,
    /// Largest z.
    #[arg(long, default_value_t = 12.0, allow_hyphen_values = true)]
    to: f64,
    /// Step.
    #[arg(long, default_value_t = 0.5)]
    step: f64,
}

pub fn run(args: CurveArgs) -> anyhow::Result<()> {
    let cfg: HlgConfig = args.hlg.defaults()?;
    if args.step <= 0.0 || args.to <= args.from {
        bail!("--step must be > 0 and --to greater than --from");
    }
    let zs: Vec<f64> = (0..)
        .map(|i| args.from + i as f64 * args.step)
        .take_while(|z| *z <= args.to + 1e-9)
        .collect();
    let curves: Vec<(ToeShape, Vec<f64>)> = ToeShape::ALL
        .into_iter()
        .map(|s| {
            let c = cfg.curve().with_toe_shape(s);
            (s, zs.iter().map(|&z| c.g1(z)).collect())
        })
        .collect();
    println!(
        "z\tidentity\t{}",
        curves
            .iter()
            .map(|c| c.0.name())
            .collect::<Vec<_>>()
            .join("\t")
    );
    for (i, z) in zs.iter().enumerate() {
        let row: Vec<String> = curves.iter().map(|c| format!("{:.6}", c.1[i])).collect();
        println!("{z}\t{z}\t{}", row.join("\t"));
    }
    Ok(())
}
