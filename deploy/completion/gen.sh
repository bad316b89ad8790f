#!/bin/sh
# Writes the bash completion of program NAME from its --help on stdin
# (make: $(BUILD)/completion/NAME, installed to
# share/bash-completion/completions/NAME). Generated, so a flag or command
# added to --help is completed with no other change; tests/e2e/install.sh
# checks every --word of each --help is offered.
#
#   deploy/completion/gen.sh NAME < HELP > FILE
#
# From --help it takes: options (every --opt in the text; what follows
# one is read from its own indented line, "--opt ARG" or "-h, --opt", else
# from "--opt ARG" elsewhere: ARG *FILE*, PNG, DEST, SPEC → file names,
# *DIR* → directories, a|b|c → those words, any other ARG → a value nobody
# can guess, none → a flag); choices written "--opt a|b|c" anywhere; commands (the
# "Commands:" section: first word, and a second lowercase word as its
# subcommand); the "algorithms:" section's names as --algo's choices.
# The completing function itself is deploy/completion/sfl-complete.bash.
set -eu
name=$1
dir=$(dirname "$0")
fn=_sfl_$(printf '%s' "$name" | tr -c 'A-Za-z0-9_\n' _)

awk -v fn="$fn" -v name="$name" -v q="'" '
function add(list, w) { return index(" " list " ", " " w " ") ? list : (list == "" ? w : list " " w) }
# What the word after an option is, from its placeholder.
function kind_of(arg) {
    if (arg == "") return "flag"
    if (arg ~ /DIR/) return "dir"
    if (arg ~ /FILE|^PNG$|^DEST$|^CERT$|^SPEC$/) return "file"
    return "value"
}
/^[A-Za-z].*:$/ { section = $0 }
/^$/ { section = "" }
# Anywhere (a command line, a note): every --opt is offered, "--opt ARG"
# says what follows it unless its own line says otherwise.
{
    s = $0
    while (match(s, /--[a-z][a-z0-9_-]*( [A-Z][A-Z0-9_:.,|-]*)?/)) {
        m = substr(s, RSTART, RLENGTH); s = substr(s, RSTART + RLENGTH)
        o = m; sub(/ .*/, "", o); a = substr(m, length(o) + 2)
        opts = add(opts, o)
        if (!(o in kind)) kind[o] = kind_of(a)
    }
    # choices: --opt a|b|c
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
    if (arg ~ /\|/ && arg !~ /[A-Z]/) { gsub(/\|/, ",", arg); if (!(opt in choice)) choice[opt] = arg; arg = "X" }
    kind[opt] = kind_of(arg)
}
END {
    if (algos != "" && !("--algo" in choice)) choice["--algo"] = algos
    n = split(opts, ol, " ")
    for (i = 1; i <= n; i++) {
        o = ol[i]
        if (kind[o] == "file") files = add(files, o)
        else if (kind[o] == "dir") dirs = add(dirs, o)
        else if (kind[o] == "value") values = add(values, o)
    }
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
