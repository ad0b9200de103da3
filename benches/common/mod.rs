//! What the benches share: the logits they run on.

/// Logits shaped like a language model's: a Gaussian bulk (σ = 2.5) with a handful of
/// strong candidates on top. Deterministic (xorshift + Box–Muller).
pub fn logits(v: usize) -> Vec<f32> {
    let mut s = 0x2545_f491_4f6c_dd1du64;
    let mut uniform = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        ((s >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    };
    let mut x: Vec<f32> = (0..v)
        .map(|_| {
            let (a, b) = (uniform(), uniform());
            ((-2.0 * a.ln()).sqrt() * (std::f64::consts::TAU * b).cos() * 2.5) as f32
        })
        .collect();
    for (i, bump) in [14.0f32, 13.2, 12.5, 11.0, 10.4].iter().enumerate() {
        x[(i * 7919) % v] = *bump;
    }
    x
}
