#!/bin/sh
# Writes the bash completion of program NAME from its --help on stdin
# (make: $(BUILD)/completion/NAME, installed to
# share/bash-completion/completions/NAME). Generated, so a flag or command
# added to --help is completed with no other change; tests/e2e/install.sh
# checks every --word of each --help is offered.
#
#   deploy/completion/gen.sh NAME < HELP > FILE
#
# From --help it takes: options (an indented line starting "--opt" or
# "-h, --opt", the placeholder after one space: *FILE*, PNG, DEST → file
# names, *DIR* → directories, a|b|c → those words, anything else → a value
# nobody can guess); choices written "--opt a|b|c" anywhere; commands (the
# "Commands:" section: first word, and a second lowercase word as its
# subcommand); the "algorithms:" section's names as --algo's choices.
# The completing function itself is deploy/completion/sfl-complete.bash.
set -eu
name=$1
dir=$(dirname "$0")
fn=_sfl_$(printf '%s' "$name" | tr -c 'A-Za-z0-9_\n' _)

awk -v fn="$fn" -v name="$name" -v q="'" '
function add(list, w) { return index(" " list " ", " " w " ") ? list : (list == "" ? w : list " " w) }
/^[A-Za-z].*:$/ { section = $0 }
/^$/ { section = "" }
# choices anywhere: --opt a|b|c
{
    s = $0
    while (match(s, /--[a-z][a-z0-9_-]*[ =][a-z0-9:]+(\|[a-z0-9:]+)+/)) {
        m = substr(s, RSTART, RLENGTH); s = substr(s, RSTART + RLENGTH)
        split(m, kv, /[ =]/); gsub(/\|/, ",", kv[2])
        if (!(kv[1] in choice)) choice[kv[1]] = kv[2]
    }
}
section == "Commands:" && /^  [a-z]/ {
    cmds = add(cmds, $1)
    if ($0 ~ /^  [a-z][a-z-]* [a-z][a-z-]*( |$)/) sub_[$1] = (sub_[$1] == "" ? $2 : sub_[$1] "," $2)
    next
}
section == "algorithms:" && /^  [a-z]/ { algos = (algos == "" ? $1 : algos "," $1); next }
/^ +(-[A-Za-z], )?--[A-Za-z]/ && match($0, /^ +/) && RLENGTH <= 6 {
    line = $0; sub(/^ *(-[A-Za-z], )?/, "", line)
    if (match($0, /^ *-[A-Za-z], /)) { short = substr($0, RSTART, RLENGTH); gsub(/[ ,]/, "", short); opts = add(opts, short) }
    opt = line; sub(/[ =].*/, "", opt)
    opts = add(opts, opt)
    rest = substr(line, length(opt) + 1)
    arg = ""
    if (rest ~ /^ [^ ]/) { arg = substr(rest, 2); sub(/ .*/, "", arg) }
    if (arg == "") next
    if (arg ~ /\|/ && arg !~ /[A-Z]/) { gsub(/\|/, ",", arg); if (!(opt in choice)) choice[opt] = arg }
    else if (arg ~ /DIR/) dirs = add(dirs, opt)
    else if (arg ~ /FILE|^PNG$|^DEST$|^CERT$|^SPEC$/) files = add(files, opt)
    else values = add(values, opt)
}
END {
    if (algos != "" && !("--algo" in choice)) choice["--algo"] = algos
    for (o in choice) { ch = add(ch, o "=" choice[o]); values = add(values, o) }
    for (c in sub_) subs = add(subs, c "=" sub_[c])
    printf "# bash completion of %s, generated from its --help by deploy/completion/gen.sh.\n", name
    printf "# Loaded by bash-completion from share/bash-completion/completions/, or\n"
    printf "# sourced by hand (it needs only bash).\n"
    printf "%s() {\n", fn
    printf "    local _opts=" q "%s" q "\n", opts
    printf "    local _files=" q "%s" q "\n", files
    printf "    local _dirs=" q "%s" q "\n", dirs
    printf "    local _values=" q "%s" q "\n", values
    printf "    local _choices=" q "%s" q "\n", ch
    printf "    local _cmds=" q "%s" q "\n", cmds
    printf "    local _subs=" q "%s" q "\n", subs
    printf "    _sfl_complete\n}\n"
    printf "complete -F %s %s\n", fn, name
}'
echo
cat "$dir/sfl-complete.bash"
