// Shell scripts that ask the program itself (`<prog> __complete …`) what can follow. Written for
// mesh; the protocol is cobra's (candidates, then `:<directive>`), so behaviour matches what users know.

function fn(program: string): string {
  return `__${program.replace(/[^A-Za-z0-9_]/g, '_')}`;
}

export function bashScript(program: string, descriptions: boolean): string {
  const f = fn(program);
  const req = descriptions ? '__complete' : '__completeNoDesc';
  return `# bash completion for ${program}                    -*- shell-script -*-
# Load with: source <(${program} completion bash)

${f}_complete() {
    local line="\${COMP_LINE:0:COMP_POINT}"
    local -a words
    read -r -a words <<< "$line"
    # The word under the cursor is empty when the line ends in a space.
    [[ "$line" =~ [[:space:]]$ ]] && words+=("")
    local prog="\${words[0]}"
    local out
    out=$("$prog" ${req} "\${words[@]:1}" 2>/dev/null) || return 0
    local directive="\${out##*:}"
    out="\${out%:*}"
    local cur="\${words[\${#words[@]}-1]}"
    # bash splits words at COMP_WORDBREAKS (= and :); the candidates must not repeat what it split off.
    local strip=""
    if [[ "$cur" == *[=:]* ]]; then
        strip="\${cur%[=:]*}"
        strip="$strip\${cur:\${#strip}:1}"
    fi
    COMPREPLY=()
    local cand
    while IFS='' read -r cand; do
        [[ -z "$cand" ]] && continue
        cand="\${cand%%$'\\t'*}"
        COMPREPLY+=("\${cand#"$strip"}")
    done <<< "$out"
    if (( \${#COMPREPLY[@]} == 0 )) && (( (directive & 4) == 0 )); then
        compopt -o default 2>/dev/null
    fi
    if (( (directive & 2) != 0 )); then
        compopt -o nospace 2>/dev/null
    fi
    return 0
}

complete -F ${f}_complete ${program}
`;
}

export function zshScript(program: string, descriptions: boolean): string {
  const f = fn(program);
  const req = descriptions ? '__complete' : '__completeNoDesc';
  return `#compdef ${program}
compdef ${f}_complete ${program}

# zsh completion for ${program}                     -*- shell-script -*-

${f}_complete() {
    local -a words_before candidates
    words_before=("\${(@)words[2,CURRENT-1]}")
    local out directive
    out=$(\${words[1]} ${req} "\${words_before[@]}" "\${words[CURRENT]}" 2>/dev/null) || return 1
    directive=\${out##*:}
    out=\${out%:*}
    local line value desc
    for line in "\${(@f)out}"; do
        [[ -z "$line" ]] && continue
        value=\${line%%$'\\t'*}
        desc=\${line#*$'\\t'}
        [[ "$desc" == "$line" ]] && desc=""
        value=\${value//:/\\\\:}
        if [[ -n "$desc" ]]; then candidates+=("$value:$desc"); else candidates+=("$value"); fi
    done
    if (( \${#candidates} > 0 )); then
        local -a nospace
        (( directive & 2 )) && nospace=(-S '')
        _describe -t commands '${program}' candidates "\${nospace[@]}"
    elif (( (directive & 4) == 0 )); then
        _files
    fi
}

if [ "$funcstack[1]" = "_${program}" ]; then
    ${f}_complete "$@"
fi
`;
}

export function fishScript(program: string, descriptions: boolean): string {
  const f = fn(program);
  const req = descriptions ? '__complete' : '__completeNoDesc';
  return `# fish completion for ${program}                  -*- shell-script -*-

function ${f}_candidates
    set -l args (commandline -opc)
    set -e args[1]
    set -l out (${program} ${req} $args (commandline -ct) 2>/dev/null)
    set -l directive (string replace -r '^:' '' -- $out[-1])
    set -e out[-1]
    for line in $out
        echo $line
    end
    if test (count $out) -eq 0; and test (math "$directive & 4") -eq 0
        __fish_complete_path (commandline -ct)
    end
end

complete -c ${program} -e
complete -c ${program} -f -a '(${f}_candidates)'
`;
}

export function powershellScript(program: string, descriptions: boolean): string {
  const req = descriptions ? '__complete' : '__completeNoDesc';
  return `# powershell completion for ${program}                 -*- shell-script -*-

Register-ArgumentCompleter -CommandName '${program}' -ScriptBlock {
    param($WordToComplete, $CommandAst, $CursorPosition)
    $Words = @($CommandAst.CommandElements | Select-Object -Skip 1 | ForEach-Object { $_.ToString() })
    if ($WordToComplete -eq '') { $Words += '' }
    $Out = @(& '${program}' ${req} @Words 2>$null)
    if ($Out.Count -eq 0) { return }
    $Directive = [int]($Out[-1].TrimStart(':'))
    $Out = $Out[0..($Out.Count - 2)] | Where-Object { $_ -ne '' }
    foreach ($Line in $Out) {
        $Parts = $Line -split "\`t", 2
        $Desc = if ($Parts.Count -gt 1 -and $Parts[1]) { $Parts[1] } else { $Parts[0] }
        [System.Management.Automation.CompletionResult]::new($Parts[0], $Parts[0], 'ParameterValue', $Desc)
    }
}
`;
}
