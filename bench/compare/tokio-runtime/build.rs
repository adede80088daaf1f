// Puts the locked tokio version into WEFT_TOKIO_VERSION (the report lists it).
fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    let lock = std::fs::read_to_string(format!("{dir}/Cargo.lock")).unwrap_or_default();
    let mut version = String::from("unknown");
    let mut lines = lock.lines();
    while let Some(l) = lines.next() {
        if l.trim() == "name = \"tokio\"" {
            if let Some(v) = lines.next() {
                version = v.trim().trim_start_matches("version = ").trim_matches('"').to_string();
            }
            break;
        }
    }
    println!("cargo:rustc-env=WEFT_TOKIO_VERSION={version}");
    println!("cargo:rerun-if-changed=Cargo.lock");
}
