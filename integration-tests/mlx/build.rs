//! Test and bench binaries link MLX's `libmlx.so` from the unpacked wheel: give them a
//! run path to it (mlx-sys's own link arguments reach only its own binaries).
fn main() {
    let link = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("vendor/mlx-sys/system-mlx");
    println!("cargo:rerun-if-changed={}", link.display());
    let lib = std::fs::canonicalize(&link)
        .expect("vendor/mlx-sys/system-mlx: run scripts/mlx-linux-setup first")
        .join("lib");
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib.display());
}
