# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_pgrun_global_optspecs
    string join \n t/timeout= idle-timeout= s/signal= k/kill-after= escalate= preserve-status wait-group p/pidfile= cancel-file= report= max-output= output-file= contain= no-guard die-with-parent detach detach-after= stdin-pipe rlimit= memory-max= pids-max= cpus= setsid v/verbose generate= h/help V/version
end

function __fish_pgrun_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    # After `--`: COMMAND's words (see __fish_pgrun_command).
    if contains -- -- $cmd
        return 1
    end
    # A line that does not parse yet ends in an option waiting for its value.
    argparse -s (__fish_pgrun_global_optspecs) -- $cmd 2>/dev/null
    or return 0
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_pgrun_using_subcommand
    set -l cmd (__fish_pgrun_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c pgrun -n "__fish_pgrun_needs_command" -s t -l timeout -d 'Stop the run after DUR (30, 1.5, 250ms, 2m, 1h, 1d; 0 = none)' -r
complete -c pgrun -n "__fish_pgrun_needs_command" -l idle-timeout -d 'Stop the run when COMMAND has written no output for DUR' -r
complete -c pgrun -n "__fish_pgrun_needs_command" -s s -l signal -d 'First signal of the stop sequence [default: TERM]' -r -f -a "TERM\t''
INT\t''
HUP\t''
QUIT\t''
KILL\t''
USR1\t''
USR2\t''
ALRM\t''
WINCH\t''
CONT\t''
STOP\t''
ABRT\t''"
complete -c pgrun -n "__fish_pgrun_needs_command" -s k -l kill-after -d 'Grace between that signal and SIGKILL [default: 10s]' -r
complete -c pgrun -n "__fish_pgrun_needs_command" -l escalate -d 'The whole stop sequence, e.g. INT/2s/TERM/5s/KILL' -r
complete -c pgrun -n "__fish_pgrun_needs_command" -s p -l pidfile -d 'Publish the run: the group id, locked while the run lives' -r -F
complete -c pgrun -n "__fish_pgrun_needs_command" -l cancel-file -d 'The cancel marker [default: PIDFILE.cancel]' -r -F
complete -c pgrun -n "__fish_pgrun_needs_command" -l report -d 'Write a JSON outcome report to PATH at exit' -r -F
complete -c pgrun -n "__fish_pgrun_needs_command" -l max-output -d 'Bound stdout and stderr to SIZE bytes each (64K, 1M): head and tail' -r
complete -c pgrun -n "__fish_pgrun_needs_command" -l output-file -d 'Also write stdout and stderr, complete and in read order, to PATH' -r -F
complete -c pgrun -n "__fish_pgrun_needs_command" -l contain -d 'What is stopped: group, tree, cgroup or auto [default: tree on Linux]' -r -f -a "group\t'The command\'s process group only'
tree\t'The group and every descendant of pgrun (Linux)'
cgroup\t'Everything in a new cgroup v2 leaf (Linux, delegated cgroup2)'
auto\t'cgroup where a leaf can be created, else tree'"
complete -c pgrun -n "__fish_pgrun_needs_command" -l detach-after -d 'Wait as for any run, but hand the run off after DUR (exit 122)' -r
complete -c pgrun -n "__fish_pgrun_needs_command" -l rlimit -d 'A limit NAME=SOFT[:HARD] for COMMAND, e.g. nofile=1024 (repeatable)' -r
complete -c pgrun -n "__fish_pgrun_needs_command" -l memory-max -d 'The run\'s memory, all members together (cgroup memory.max, no swap)' -r
complete -c pgrun -n "__fish_pgrun_needs_command" -l pids-max -d 'At most N tasks in the run at once (cgroup pids.max)' -r
complete -c pgrun -n "__fish_pgrun_needs_command" -l cpus -d 'CPU bandwidth worth X CPUs, e.g. 0.5 or 2 (cgroup cpu.max)' -r
complete -c pgrun -n "__fish_pgrun_needs_command" -l generate -d 'Print a man page or a shell\'s completion script and exit' -r -f -a "man\t'man/pgrun.1'
man-cancel\t'man/pgrun-cancel.1'
man-status\t'man/pgrun-status.1'
man-wait\t'man/pgrun-wait.1'
man-output\t'man/pgrun-output.1'
man-ls\t'man/pgrun-ls.1'
man-send\t'man/pgrun-send.1'
bash\t''
zsh\t''
fish\t''
elvish\t''
powershell\t''"
complete -c pgrun -n "__fish_pgrun_needs_command" -l preserve-status -d 'On timeout (or idle timeout), exit with COMMAND\'s status instead of 124'
complete -c pgrun -n "__fish_pgrun_needs_command" -l wait-group -d 'When COMMAND exits, let the rest of its group finish on its own'
complete -c pgrun -n "__fish_pgrun_needs_command" -l no-guard -d 'Run without the guard that stops the run if pgrun is killed with SIGKILL'
complete -c pgrun -n "__fish_pgrun_needs_command" -l die-with-parent -d 'Stop the run as if cancelled when the process that started pgrun dies'
complete -c pgrun -n "__fish_pgrun_needs_command" -l detach -d 'Return once the run is published; it lives on in a session of its own'
complete -c pgrun -n "__fish_pgrun_needs_command" -l stdin-pipe -d 'COMMAND\'s stdin is a pipe pgrun holds open: write to it with `pgrun send`'
complete -c pgrun -n "__fish_pgrun_needs_command" -l setsid -d 'Start COMMAND in a new session instead of a new group (no terminal)'
complete -c pgrun -n "__fish_pgrun_needs_command" -s v -l verbose -d 'Say what pgrun does, one line per action on stderr'
complete -c pgrun -n "__fish_pgrun_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c pgrun -n "__fish_pgrun_needs_command" -s V -l version -d 'Print version'
complete -c pgrun -n "__fish_pgrun_needs_command" -a "cancel" -d 'Stop a run from another process, by its pid file.'
complete -c pgrun -n "__fish_pgrun_needs_command" -a "status" -d 'Say whether a run is alive, by its pid file.'
complete -c pgrun -n "__fish_pgrun_needs_command" -a "wait" -d 'Wait for a run to be over, by its pid file.'
complete -c pgrun -n "__fish_pgrun_needs_command" -a "output" -d 'Read a window of a run\'s output file, from byte N.'
complete -c pgrun -n "__fish_pgrun_needs_command" -a "ls" -d 'List the runs published in a folder.'
complete -c pgrun -n "__fish_pgrun_needs_command" -a "send" -d 'Write to a run\'s stdin pipe (--stdin-pipe).'
complete -c pgrun -n "__fish_pgrun_using_subcommand cancel" -l wait-start -d 'How long to wait for a pid file to appear' -r
complete -c pgrun -n "__fish_pgrun_using_subcommand cancel" -s t -l timeout -d 'Bound the wait for the run to stop; past it, SIGKILL the group' -r
complete -c pgrun -n "__fish_pgrun_using_subcommand cancel" -l cancel-file -d 'The cancel marker, if the run was given --cancel-file [default: PIDFILE.cancel]' -r -F
complete -c pgrun -n "__fish_pgrun_using_subcommand cancel" -l report -d 'The run\'s report (the PATH it was given): a run over answers at once (exit 1)' -r -F
complete -c pgrun -n "__fish_pgrun_using_subcommand cancel" -l keep-pending -d 'If no run appears, leave the marker so the run is cancelled when it starts'
complete -c pgrun -n "__fish_pgrun_using_subcommand cancel" -l no-wait -d 'Return as soon as the request is delivered'
complete -c pgrun -n "__fish_pgrun_using_subcommand cancel" -l force -d 'Stop the group named by a stale pid file (nobody holds its lock)'
complete -c pgrun -n "__fish_pgrun_using_subcommand cancel" -s v -l verbose -d 'Say what cancel does, on stderr'
complete -c pgrun -n "__fish_pgrun_using_subcommand cancel" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c pgrun -n "__fish_pgrun_using_subcommand status" -l cancel-file -d 'The cancel marker, if the run was given --cancel-file [default: PIDFILE.cancel]' -r -F
complete -c pgrun -n "__fish_pgrun_using_subcommand status" -l json -d 'Print one JSON object instead of a line'
complete -c pgrun -n "__fish_pgrun_using_subcommand status" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c pgrun -n "__fish_pgrun_using_subcommand wait" -l wait-start -d 'How long to wait for a pid file to appear' -r
complete -c pgrun -n "__fish_pgrun_using_subcommand wait" -s t -l timeout -d 'Give up after DUR (exit 124), leaving the run alone' -r
complete -c pgrun -n "__fish_pgrun_using_subcommand wait" -l report -d 'The run\'s report (the PATH it was given): exit with the run\'s own status' -r -F
complete -c pgrun -n "__fish_pgrun_using_subcommand wait" -l ready -d 'Wait until a process of the run listens on TCP port PORT (any port without one), not for its end: 0 ready, 1 the run was over first' -r
complete -c pgrun -n "__fish_pgrun_using_subcommand wait" -s v -l verbose -d 'Say what wait does, on stderr'
complete -c pgrun -n "__fish_pgrun_using_subcommand wait" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c pgrun -n "__fish_pgrun_using_subcommand output" -l since -d 'Start the window at byte N of FILE' -r
complete -c pgrun -n "__fish_pgrun_using_subcommand output" -l max -d 'At most SIZE bytes from N on (at least 4) [default: 64K]' -r
complete -c pgrun -n "__fish_pgrun_using_subcommand output" -l tail -d 'The last SIZE bytes past N instead (at least 4)' -r
complete -c pgrun -n "__fish_pgrun_using_subcommand output" -l wait -d 'Wait up to DUR for bytes past N, or the run\'s end (with --pidfile)' -r
complete -c pgrun -n "__fish_pgrun_using_subcommand output" -l until -d 'With --wait: wait for a line past N that matches REGEX' -r
complete -c pgrun -n "__fish_pgrun_using_subcommand output" -l pidfile -d 'The pid file of the run that writes FILE: say, and wait for, its end' -r -F
complete -c pgrun -n "__fish_pgrun_using_subcommand output" -l json -d 'Print one JSON object instead of the window\'s bytes'
complete -c pgrun -n "__fish_pgrun_using_subcommand output" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c pgrun -n "__fish_pgrun_using_subcommand ls" -l json -d 'Print one JSON array of status --json objects instead of lines'
complete -c pgrun -n "__fish_pgrun_using_subcommand ls" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c pgrun -n "__fish_pgrun_using_subcommand send" -l file -d 'Send the bytes of FILE instead of TEXT' -r -F
complete -c pgrun -n "__fish_pgrun_using_subcommand send" -s t -l timeout -d 'Give up (exit 124) when COMMAND has read nothing for DUR' -r
complete -c pgrun -n "__fish_pgrun_using_subcommand send" -l eof -d 'Then close the pipe: COMMAND reads end-of-file (alone: only close it)'
complete -c pgrun -n "__fish_pgrun_using_subcommand send" -s v -l verbose -d 'Say what send does, on stderr'
complete -c pgrun -n "__fish_pgrun_using_subcommand send" -s h -l help -d 'Print help (see more with \'--help\')'

# COMMAND's words, from its name to the word being completed: printed, and
# true, where they are (after `--`, or from the first word that is neither
# an option nor an option's value; cancel, status, wait, output and ls
# first on the line are modes).
function __fish_pgrun_command
    set -l words (commandline -opc) (commandline -ct)
    set -e words[1]
    set -l i 1
    while set -q words[$i]
        switch $words[$i]
            case --
                set -e words[1..$i]
                printf '%s\n' $words
                return 0
            case -t --timeout --idle-timeout -s --signal -k --kill-after --escalate -p --pidfile --cancel-file --report --max-output --output-file --contain --detach-after --rlimit --memory-max --pids-max --cpus --generate
                set i (math $i + 2)
            case '-*'
                set i (math $i + 1)
            case cancel status wait output ls send
                test $i -gt 1; or return 1
                break
            case '*'
                break
        end
    end
    set -q words[$i]; or return 1
    printf '%s\n' $words[$i..-1]
end

complete -c pgrun -n __fish_pgrun_command -x -a '(__fish_complete_subcommand --commandline (__fish_pgrun_command))'
