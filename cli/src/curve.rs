//! `mistralrs-hlg curve`: the curve g₁(z) of each toe shape, as a table (the SVG figure
//! is `mistralrs-hlg-eval curve`, in the evaluation's crate).

use mistralrs_hlg::server::CurveTable;

pub fn run(table: CurveTable) -> anyhow::Result<()> {
    let (zs, curves) = table.tabulate()?;
    let names: Vec<&str> = curves.iter().map(|c| c.0.name()).collect();
    println!("z\tidentity\t{}", names.join("\t"));
    for (i, z) in zs.iter().enumerate() {
        let row: Vec<String> = curves.iter().map(|c| format!("{:.6}", c.1[i])).collect();
        println!("{z}\t{z}\t{}", row.join("\t"));
    }
    Ok(())
}
