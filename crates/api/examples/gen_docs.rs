//! Writes the reference docs and the OpenAPI document generated from bc-api's registry
//! into a directory (`cargo xtask docs` passes `docs/reference`): `api/<resource>.md`,
//! `openapi.json`, and `providers.md` from the adapters' declarations. Pages of resources
//! that no longer exist are removed, so the directory is exactly what is generated.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let Some(dir) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: gen_docs <docs/reference directory>");
        return ExitCode::from(2);
    };
    let files = bc_api::docs::generated_files(bc_api::registry(), &bc_providers::offers());
    let api_dir = dir.join("api");
    if let Err(e) = std::fs::create_dir_all(&api_dir) {
        eprintln!("gen_docs: cannot create {}: {e}", api_dir.display());
        return ExitCode::FAILURE;
    }
    // Stale pages first, so a removed resource leaves no page behind.
    if let Ok(entries) = std::fs::read_dir(&api_dir) {
        for entry in entries.flatten() {
            let name = format!("api/{}", entry.file_name().to_string_lossy());
            if name.ends_with(".md") && !files.iter().any(|(path, _)| *path == name) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
    for (path, contents) in &files {
        let target = dir.join(path);
        if let Err(e) = std::fs::write(&target, contents) {
            eprintln!("gen_docs: cannot write {}: {e}", target.display());
            return ExitCode::FAILURE;
        }
        println!("wrote {}", target.display());
    }
    ExitCode::SUCCESS
}
