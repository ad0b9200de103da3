//! The curve on a small vector, with the core alone (`default-features = false`).
//!
//! `cargo run --release --no-default-features --example curve`

use mistralrs_hlg::{HlgConfig, ToeShape};

fn main() -> anyhow::Result<()> {
    let logits = [9.0f32, 8.5, 6.0, 3.0, 0.0, -4.0, -9.0, f32::NEG_INFINITY];
    for shape in ToeShape::ALL {
        let cfg: HlgConfig =
            serde_json::from_str(&format!(r#"{{"toe_shape": "{}"}}"#, shape.name()))?;
        let mut y = logits;
        cfg.curve().apply(&mut y);
        println!("{:>9}: {:?}", shape.name(), y);
    }
    Ok(())
}
