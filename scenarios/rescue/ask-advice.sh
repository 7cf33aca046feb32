#!/bin/sh
# Ask command for the rescue scenarios: answers the way a stronger model
# would, from the question alone, deterministically. It exits 1
# ("unavailable") when the question lacks a part the contract promises, so a
# scenario notices a broken question rather than replaying a stale answer.
case "$1" in
  *"## The agent's task"*"## The repeated call"*"## The output the agent already has from this call"*"## Its recent calls"*) ;;
  *) echo "question is missing a section" >&2; exit 1 ;;
esac
case "$1" in
  *"tool: grep"*)
    echo "Stop searching: the output you already have answers it. resolve_config_path is defined at src/config.rs:88 and takes the --config value as an Option<PathBuf>. Next action: edit src/main.rs so the serve subcommand passes args.config to resolve_config_path, then run cargo build." ;;
  *)
    echo "You have everything you need in src/config.rs. Next action: make the edit in src/main.rs and run cargo build." ;;
esac
