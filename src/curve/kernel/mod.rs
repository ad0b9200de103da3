//! The slice kernels. Each hot loop is written once as an `#[inline(always)]` body,
//! generic over the multiply-add ([`fastmath::Madd`]), and instantiated twice: for the
//! baseline target with separate multiplies and adds, and, picked at run time, for AVX2
//! with FMA. The two agree within the documented error of `fastmath` (last bits may
//! differ); both are monotone and both are tested.
//!
//! `pivot` computes the per-vector pivot, `toe` applies the curve; each has its AVX2
//! instantiations in a child `avx2` module.

/// Entries per 256-bit vector.
const LANES: usize = 8;

/// Vectors the AVX2 code computes together (the length of `fastmath::v8::Vn`).
#[cfg(target_arch = "x86_64")]
const WAYS: usize = std::mem::size_of::<crate::fastmath::v8::Vn>()
    / std::mem::size_of::<std::arch::x86_64::__m256>();

/// Whether the AVX2 + FMA instantiation runs: the CPU has both, and the environment
/// does not ask for the baseline (`MISTRALRS_HLG_KERNEL=baseline`, which the test
/// script uses to run the property tests through both). Decided once per process.
#[cfg(target_arch = "x86_64")]
pub(super) fn fast_path() -> bool {
    static FAST: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *FAST.get_or_init(|| {
        std::is_x86_feature_detected!("avx2")
            && std::is_x86_feature_detected!("fma")
            && std::env::var("MISTRALRS_HLG_KERNEL").map_or(true, |v| v != "baseline")
    })
}

macro_rules! dispatch {
    ($(#[$m:meta])* fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty = $body:ident;) => {
        $(#[$m])*
        pub(crate) fn $name($($arg: $ty),*) -> $ret {
            #[cfg(target_arch = "x86_64")]
            {
                if $crate::curve::kernel::fast_path() {
                    #[target_feature(enable = "avx2,fma")]
                    unsafe fn avx2($($arg: $ty),*) -> $ret {
                        $body::<$crate::fastmath::Fused>($($arg),*)
                    }
                    // SAFETY: AVX2 and FMA are present, checked just above.
                    return unsafe { avx2($($arg),*) };
                }
            }
            $body::<$crate::fastmath::Plain>($($arg),*)
        }
    };
    // With a hand-written AVX2 + FMA function (`avx2` module) for the fast path.
    ($(#[$m:meta])* fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty = $fast:path | $body:ident;) => {
        $(#[$m])*
        pub(crate) fn $name($($arg: $ty),*) -> $ret {
            #[cfg(target_arch = "x86_64")]
            if $crate::curve::kernel::fast_path() {
                // SAFETY: AVX2 and FMA are present, checked just above.
                return unsafe { $fast($($arg),*) };
            }
            $body::<$crate::fastmath::Plain>($($arg),*)
        }
    };
}

// After the macro: both modules use it.
pub(super) mod pivot;
pub(super) mod toe;

#[cfg(all(test, target_arch = "x86_64"))]
mod test_support {
    pub(super) fn have_avx2() -> bool {
        std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
    }

    pub(super) fn assert_same_bits(name: &str, xs: &[f32], got: &[f32], want: &[f32]) {
        for ((x, g), w) in xs.iter().zip(got).zip(want) {
            assert!(
                g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
                "{name}({x}): {g} vs {w}"
            );
        }
    }
}
