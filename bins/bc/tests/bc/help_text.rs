//! Issue 29, item 9: `bc --help` lists each command with the first sentence of its
//! description, Markdown links as plain words — what a terminal wants, not the reference
//! page's text.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_bc");

/// `bc args…`'s standard output (no configuration needed for help).
fn help(args: &[&str]) -> String {
    let out = Command::new(BIN).args(args).env("NO_COLOR", "1").output().expect("bc runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("UTF-8")
}

/// The one-line descriptions of the `Commands:` section of a help text.
fn command_lines(text: &str) -> Vec<String> {
    text.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .map(|l| l.trim().split_once(' ').map_or("", |(_, about)| about.trim()).to_owned())
        .map(|about| about.split(" [alias:").next().unwrap_or("").to_owned())
        .collect()
}

#[test]
fn commands_are_listed_by_their_first_sentence_with_links_as_words() {
    let mut pages = vec![help(&["--help"])];
    for resource in ["pools", "nodepools", "clusters", "substrates", "accounts"] {
        pages.push(help(&[resource, "--help"]));
    }
    for page in &pages {
        assert!(!page.contains("](/"), "a raw Markdown link:\n{page}");
        for about in command_lines(page) {
            // One sentence: no sentence stop before its end.
            let inner = about.trim_end_matches('.');
            assert!(!inner.contains(". "), "more than one sentence: {about}");
        }
    }
    let top = &pages[0];
    assert!(
        top.contains("the managed Kubernetes cluster behind it (kubernetesSubstrates)."),
        "the link's words stay:\n{top}"
    );
}

#[test]
fn a_first_sentence_ends_at_a_full_stop_outside_parentheses_and_abbreviations() {
    use bc_cli::commands::{first_sentence, plain};
    assert_eq!(
        first_sentence("Waits (see [wait](/docs/wait). Really), e.g. for `ready`. Then more."),
        "Waits (see wait. Really), e.g. for ready."
    );
    assert_eq!(first_sentence("No stop at all"), "No stop at all");
    assert_eq!(first_sentence("Version 1.32 is out. Yes."), "Version 1.32 is out.");
    assert_eq!(plain("a [b] c [d](e) [f](g"), "a [b] c d [f](g");
}
