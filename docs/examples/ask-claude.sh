#!/bin/sh
# ask-claude: an ask command for repeat-tool-guard's `rescue` policy, built on
# the Claude Code CLI (`claude`).
#
# Contract (docs/policies/rescue.md): invoked as `ask-claude "<question>"`,
# one argument, no stdin; prints the advice on stdout and exits 0; any other
# outcome means "unavailable" and the guard falls back to its local denial.
#
# The responder must answer from the text of the question alone and must not
# be able to read or change the calling machine: every built-in tool is
# switched off (--tools ""), the file, shell, web and task tools are denied by
# name as well (for CLIs that predate --tools, which then fail loudly rather
# than run with tools), no MCP server from the user's config is loaded, the
# run is limited to one turn, and it starts in an empty scratch directory.
#
# Install:  cp docs/examples/ask-claude.sh ~/.local/bin/ask-claude
#           chmod +x ~/.local/bin/ask-claude
# The guard passes its `ask_model` setting as $ASK_MODEL (default: opus).
# Not tested against the real service by this project's test suite.
set -u

if [ "$#" -ne 1 ] || [ -z "$1" ]; then
    echo 'usage: ask-claude "<question>"' >&2
    exit 2
fi

scratch=$(mktemp -d "${TMPDIR:-/tmp}/ask-claude.XXXXXX") || exit 1
trap 'rm -rf "$scratch"' EXIT INT TERM
cd "$scratch" || exit 1

claude --print \
    --model "${ASK_MODEL:-opus}" \
    --max-turns 1 \
    --tools "" \
    --disallowedTools "Bash,BashOutput,KillShell,Edit,MultiEdit,Write,NotebookEdit,Read,Glob,Grep,LS,WebFetch,WebSearch,Task,TodoWrite" \
    --strict-mcp-config --mcp-config '{"mcpServers":{}}' \
    --append-system-prompt "You cannot use tools. Answer from the text of the question alone with one concrete next action." \
    "$1" </dev/null
