# The completing function every sfl program's completion calls, with the
# program's lists in its caller's locals (_opts, _files, _dirs, _values,
# _choices "--opt=a,b", _cmds, _subs "cmd=sub,sub"; deploy/completion/gen.sh).
# Plain bash: no bash-completion helpers needed.
_sfl_complete() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev='' w i n=0 c
    local -a pos=()
    COMPREPLY=()
    [ "$COMP_CWORD" -gt 0 ] && prev=${COMP_WORDS[COMP_CWORD - 1]}
    # bash splits "--opt=value" at '=' (COMP_WORDBREAKS): "--opt" "=" "value".
    if [ "$cur" = = ]; then
        cur=''
    elif [ "$prev" = = ] && [ "$COMP_CWORD" -gt 1 ]; then
        prev=${COMP_WORDS[COMP_CWORD - 2]}
    fi
    case " $_files " in *" $prev "*)
        compopt -o filenames 2> /dev/null
        mapfile -t COMPREPLY < <(compgen -f -- "$cur")
        return ;;
    esac
    case " $_dirs " in *" $prev "*)
        compopt -o filenames 2> /dev/null
        mapfile -t COMPREPLY < <(compgen -d -- "$cur")
        return ;;
    esac
    for w in $_choices; do
        if [ "${w%%=*}" = "$prev" ]; then
            w=${w#*=}
            mapfile -t COMPREPLY < <(compgen -W "${w//,/ }" -- "$cur")
            return
        fi
    done
    case " $_values " in *" $prev "*) return ;; esac
    if [ "${cur#-}" != "$cur" ]; then
        mapfile -t COMPREPLY < <(compgen -W "$_opts" -- "$cur")
        return
    fi
    # The words before this one that are not options or their values.
    for ((i = 1; i < COMP_CWORD; i++)); do
        w=${COMP_WORDS[i]}
        case $w in
        =) i=$((i + 1)) ;;
        -*) case " $_files $_dirs $_values " in *" $w "*)
                [ "${COMP_WORDS[i + 1]}" = = ] || i=$((i + 1)) ;;
            esac ;;
        *) pos+=("$w") ;;
        esac
    done
    n=${#pos[@]}
    if [ "$n" -eq 0 ] && [ -n "$_cmds" ]; then
        mapfile -t COMPREPLY < <(compgen -W "$_cmds" -- "$cur")
        return
    fi
    if [ "$n" -eq 1 ]; then
        for c in $_subs; do
            if [ "${c%%=*}" = "${pos[0]}" ]; then
                c=${c#*=}
                mapfile -t COMPREPLY < <(compgen -W "${c//,/ }" -- "$cur")
                return
            fi
        done
    fi
    # Arguments: files (job files, certificates, directories, outputs).
    compopt -o filenames 2> /dev/null
    mapfile -t COMPREPLY < <(compgen -f -- "$cur")
}
