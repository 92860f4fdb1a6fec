import { PROC_SCRIPT } from '../procs.js';

// The remote half of SshHost.pollDir: a POSIX sh loop on one long-lived SSH channel. The client
// writes commands on its stdin (one per line) and a `t SEQ` tick at the poll interval; for each tick
// the loop lists every watched directory and emits the new bytes of every followed file, so a
// pollDir() on the client costs no round trip and no channel. Paths arrive as data read with
// `read -r`, never as shell text (each path line ends in a `|` sentinel so trailing blanks
// survive); `set -f` disables globbing; ids are checked to be numeric before any `eval`.

//
// Commands (client → remote):
//   t SEQ                       emit a frame: B SEQ … Z SEQ
//   d ID PATH|                  list directory PATH in every frame
//   u ID                        stop listing ID
//   f ID OFF INO MAX PATH|      follow PATH from byte OFF; INO = inode last seen (0 unknown, -1 gone);
//                               at most MAX bytes per frame
//   g ID                        stop following ID
//   o ID OFF INO MAX PATH|      read PATH once from OFF (answer right away, outside frames)
//   b BID N                     then N lines `PATH|`: read these files whole, at once (sent only when
//                               the loop said `H 1 1`: GNU find and a scratch file); answer:
//                               `y R INO SIZE MTIME TYPE MODE PATH` per path that exists (R = c: its
//                               bytes are in the block, r readable, u not), `Y BID TOT` + TOT raw
//                               bytes (the c files — regular, readable, <= 256 KiB, unchanged for
//                               2 s — concatenated in y order), `w INO SIZE MTIME PATH` per c file
//                               read again after the bytes, `X BID RC` (RC: cat's exit, 0 when
//                               every file was read whole; else nothing is taken from the bytes);
//                               a path with no y line is missing
//   P ID TK MODE KNOWN PIDS RUNDIR|  run the process-table reader of procs.ts (TK 1|-, KNOWN and
//                               PIDS comma-separated or -) in a subshell; answer: a `P ID` line,
//                               its raw output, then `\n@@P ID NONCE@@\n` (NONCE = $2, random)
//   k TERM|KILL PID             end a command this client started (exec timeout, stream stop):
//                               its process group, else the pid — without a new channel
//   x ID N                      then N lines `ARG|`: run `sh -c ARG1 sh ARG2…` (a one-line file
//                               script of files.ts: stat, list, read, signal) with stdin from
//                               /dev/null, under `timeout 20` where there is one; answer: `Q ID`,
//                               its raw stdout, `\n@@Q ID NONCE@@\n`, then `q ID RC LAST-STDERR-LINE`
//                               (a look costs a fork in this shell, not an SSH session)
//   a ID N / p ID …             x / P run aside: a background job of the loop's shell, its answer
//                               (the same as x's / P's) kept in a scratch file of its own until J;
//                               where there is no scratch file, run as x / P
//   J                           once every ask run aside since the last J has ended, their answers in
//                               the order asked (a look, the host's resources and the process table
//                               side by side instead of one after another: SshHost.lookAhead)
//   w ID NS NA ND               then NS lines `SCRIPT-LINE|`, NA lines `ARG|`, ND lines `DATA-LINE|`:
//                               like x, for a script of many lines fed ND lines on stdin (joined
//                               by line breaks, no break added after the last; ND = 0: stdin
//                               /dev/null) — the writes of files.ts (appends to nsa-top's own
//                               files, mkdir, …) without a session each; the same answer as x
// Output (remote → client):
//   L ID / e INO TYPE SIZE MTIME NAME / E ID     a listing (GNU find); `l <ls -lnai line>` without it
//   N ID                                         directory missing or unreadable
//   s K ID INO SIZE MTIME TYPE MODE RESET OFF LEN   then exactly LEN raw bytes (K = f | o;
//                                                RESET = - | r (replaced) | x (truncated);
//                                                TYPE u: a file this user may not read)
//   m K ID                                       file missing
//   H G B UID CPUS GPU NS S                      the hello, once: G 1 GNU find, B 1 bulk reads; `id -u`,
//                                                the CPU count, g when nvidia-smi is on the PATH
//                                                (- each: not known); the clock (date +%s%N, +%s)
// (`$\{` below stands for `${`, which a template literal would interpolate)
/**
 * The box's constant facts as the watch loop's start probes them, one line: `pre G X D UID CPUS
 * GPU TK PG` (G GNU find, X xargs -d, D a dd that reads OFF..LEN exactly: 1 or 0; `id -u`, the CPU
 * count, g when nvidia-smi is on the PATH, the clock ticks a second and the page size, which a
 * process table's first read reports: - where not known). A kept connection's warm session
 * (keeper.ts) runs it while it waits to be claimed and hands it to the loop as $3, so a kept
 * command's loop says hello without a process of its own but for its clock and scratch file.
 */
export const WATCH_FACTS = String.raw`{ printf 'pre %s %s %s %s %s %s %s %s
' "$(find / -maxdepth 0 -printf '' && echo 1 || echo 0)" "$(printf 'x
' | xargs -d '
' true && echo 1 || echo 0)" "$([ "$(printf 'abcd' | dd bs=2 skip=1 count=1 iflag=skip_bytes,fullblock conv=sync status=none)" = bc ] && echo 1 || echo 0)" "$(id -u || echo -)" "$(getconf _NPROCESSORS_ONLN || nproc || echo -)" "$(command -v nvidia-smi >/dev/null && echo g || echo -)" "$(getconf CLK_TCK || echo -)" "$(getconf PAGESIZE || echo -)"; } 2>/dev/null`;

export const WATCH_SCRIPT = String.raw`exec 2>/dev/null
exec 3>&1
NONCE=$2
NL='
'
procs_fn() {
@@PROC_SCRIPT@@
}
set -f
MODE=$1
# the box's constant facts, probed already by a kept connection's warm session (WATCH_FACTS, $3:
# keeper.ts) while it waited to be claimed; else (or not as expected) probed here
PRE=
case $3 in 'pre '*)
  set -- $3
  case "$2$3$4 $7" in [01][01][01]' g'|[01][01][01]' -') PRE=1; pG=$2 pX=$3 pD=$4 pU=$5 pC=$6 pN=$7 pK=$8 pS=$9;; esac
  case "$pU$pC" in *[!0-9-]*) PRE=;; esac
  # (the clock ticks and page size, for the process table's first read: getconf's there when not said)
  case "$pK" in ''|*[!0-9]*) pK=;; esac
  case "$pS" in ''|*[!0-9]*) pK=;; esac;;
esac
[ -n "$PRE" ] || pK=
G=0
if [ "$MODE" != posix ]; then
  if [ -n "$PRE" ]; then [ "$pG" = 1 ] && G=1; elif find / -maxdepth 0 -printf '' ; then G=1; fi
fi
# bulk reads (b) need GNU find, xargs -d and a scratch file of this loop's own, removed on exit
BT=
if [ $G = 1 ] && if [ -n "$PRE" ]; then [ "$pX" = 1 ]; else printf 'x\n' | xargs -d '\n' true; fi; then
  # named by this loop's pid (rmbt below sweeps what a SIGKILLed loop left)
  BT=$(mktemp "$\{TMPDIR:-/tmp}/nsa-top-watch.$$.XXXXXX") || BT=
fi
# (an EXIT trap does not run when a signal ends the shell: a channel closed under the loop (a kept
# connection's client gone, a frame written to a pipe nobody reads) ended it by SIGPIPE or SIGHUP and
# left the files in the box's /tmp, one set per command; each of these signals exits instead)
# (and the answers of asks run aside, $BT.j1 … $BT.jJM: see J below)
JM=0
rmbt() {
  set -- "$BT" "$BT.c" "$BT.fl" "$BT.fp" "$BT.fs" "$BT.s"; k=1
  while [ "$k" -le "$JM" ]; do set -- "$@" "$BT.j$k"; k=$((k + 1)); done
  rm -f -- "$@"
  # what a loop SIGKILL ended left (no trap runs then: an SSH client killed, the box's OOM killer)
  # goes with the next loop that ends here, off the path to its first frame (a find and an id at
  # the start put its hello 13–16 ms later, of ~60): this user's, its loop's pid gone, untouched
  # for 10 minutes (a live loop makes each file anew when it uses it)
  find "$\{TMPDIR:-/tmp}/." -maxdepth 1 -type f -name 'nsa-top-watch.[0-9]*.*' -user "$(id -u)" -mmin +10 |
    while IFS= read -r f; do
      p=$\{f##*/nsa-top-watch.}; p=$\{p%%.*}
      case $p in ''|*[!0-9]*) continue;; esac
      [ -d "/proc/$p" ] || kill -0 "$p" || rm -f -- "$f"
    done
}
[ -n "$BT" ] && trap rmbt EXIT && trap 'exit 129' HUP && trap 'exit 130' INT && trap 'exit 141' PIPE && trap 'exit 143' TERM
# a read of LEN bytes from OFF by one dd (GNU: skip_bytes, fullblock; zeros past a shrunk end)
# where it does exactly that here, instead of a subshell, tail, cat and head per file: a frame
# reads every followed file that grew (a live run appends to five or six every step)
DD=
if [ -n "$PRE" ]; then [ "$pD" = 1 ] && DD=1
elif [ "$(printf 'abcd' | dd bs=2 skip=1 count=1 iflag=skip_bytes,fullblock conv=sync status=none)" = bc ]; then DD=1; fi
PST=
FD=1
# a FIFO swapped in after the find must not hang the loop in cat
TO=; command -v timeout >/dev/null && TO="timeout 20"
# the hello says what the box can do and its constant facts, so none is a round trip of its own
# (host.ts): uid, CPU count, nvidia-smi on the PATH — and its clock last, the nearest to the line
B=0; [ -n "$BT" ] && B=1
if [ -n "$PRE" ]; then HF="$pU $pC $pN"
else
  HF="$(id -u || echo -) $(getconf _NPROCESSORS_ONLN || nproc || echo -)"
  if command -v nvidia-smi >/dev/null; then HF="$HF g"; else HF="$HF -"; fi
fi
# (one date for both: a process less before the hello, the same two words)
echo "H $G $B $HF $(date '+%s%N %s')"
dids=
fids=
num() { case $1 in ''|*[!0-9]*) return 1;; esac; return 0; }
rmid() { out=; for j in $1; do [ "$j" = "$2" ] || out="$out $j"; done; }
ld() {
  # a listing (or a missing dir) is sent only when it differs from the last one sent
  eval "pv=\$lp_$1"
  # listable but not searchable (mode 444): nothing in it can be read — unreadable, not empty
  if [ ! -d "$2" ] || [ ! -r "$2" ] || [ ! -x "$2" ]; then
    [ "$pv" = N ] || printf 'N %s\n' "$1"
    eval "lp_$1=N"; return
  fi
  if [ $G = 1 ]; then cur=+$(find -L "$2" -mindepth 1 -maxdepth 1 -printf 'e %i %y %s %T@ %f\n')
  else cur=+$(ls -lnaiL "$2" | while IFS= read -r x; do printf 'l %s\n' "$x"; done)
  fi
  [ "$cur" = "$pv" ] && return
  printf 'L %s\n' "$1"
  [ "$cur" = + ] || printf '%s\n' "$\{cur#+}"
  printf 'E %s\n' "$1"
  eval "lp_$1=\$cur"
}
rd() {
  k=$1; id=$2; off=$3; ino=$4; max=$5; p=$6
  if [ -n "$PST" ]; then st=$PST; [ "$st" = - ] && st=
  elif [ $G = 1 ]; then st=$(find -L "$p" -maxdepth 0 -printf '%i %s %T@ %y %m')
  else
    st=
    set -- $(ls -lniLd "$p")
    if [ -n "$1" ]; then
      case $2 in d*) t=d;; -*) t=f;; *) t=o;; esac
      st="$1 $6 0 $t 0"
    fi
  fi
  if [ -z "$st" ]; then
    if [ "$k" = o ]; then printf 'm o %s\n' "$id"
    else eval "pv=\$sp_$id"; [ "$pv" = m ] || printf 'm f %s\n' "$id"; eval "sp_$id=m"
    fi
    R_OFF=$off; R_INO=-1; return
  fi
  set -- $st
  # a file we may not read is said so (type u), never read as zeros
  if [ "$4" = f ] && [ ! -r "$p" ]; then set -- "$1" "$2" "$3" u "$5"; fi
  rs=-
  if [ "$ino" != 0 ] && [ "$ino" != "$1" ]; then rs=r; off=0; fi
  if [ "$2" -lt "$off" ]; then rs=x; off=0; fi
  len=$(( $2 - off ))
  [ "$len" -gt "$max" ] && len=$max
  [ "$len" -lt 0 ] && len=0
  [ "$4" = f ] || len=0
  R_OFF=$((off + len)); R_INO=$1
  if [ "$k" = f ]; then
    # an unchanged follow (same stat, nothing new) costs nothing
    cur="$1 $2 $3 $4 $5 $rs $off $len"
    eval "pv=\$sp_$id"
    [ "$len" = 0 ] && [ "$cur" = "$pv" ] && return
    eval "sp_$id=\$cur"
  fi
  printf 's %s %s %s %s %s %s %s %s %s %s\n' "$k" "$id" "$1" "$2" "$3" "$4" "$5" "$rs" "$off" "$len"
  # [ -f ] again right before reading: a FIFO swapped in since the stat must not block the loop
  if [ "$len" -gt 0 ]; then
    if [ -n "$DD" ] && [ -f "$p" ]; then dd if="$p" bs="$len" skip="$off" count=1 iflag=skip_bytes,fullblock conv=sync status=none || head -c "$len" /dev/zero
    else { [ -f "$p" ] && tail -c +$((off + 1)) "$p"; cat /dev/zero; } | head -c "$len"; fi
  fi
}
pf() {
  r=$1; i=$\{r%% *}; r=$\{r#* }; off=$\{r%% *}; r=$\{r#* }; ino=$\{r%% *}; r=$\{r#* }; max=$\{r%% *}; p=$\{r#* }; p=$\{p%|}
  num "$i" && num "$off" && num "$max" || return 1
  case $ino in -1) ;; *) num "$ino" || return 1;; esac
  return 0
}
# x's run: its answer (Q, the raw stdout on fd 3 between the markers, then its exit and last stderr
# line); P's: the process table between its markers — each in the loop, or aside (a and p)
xrun() {
  printf 'Q %s\n' "$i"
  # (an exec's 'exec "$@"' under timeout: timeout runs the command itself, no shell between)
  if [ -n "$TO" ] && [ "$sc" = 'exec "$@"' ]; then xe=$($TO "$@" </dev/null 2>&1 1>&3); xr=$?
  else xe=$($TO sh -c "$sc" sh "$@" </dev/null 2>&1 1>&3); xr=$?; fi
  if [ "$xr" = 0 ] || [ -z "$xe" ]; then xe=; else xe=$(printf '%s\n' "$xe" | tail -n 1); fi
  printf '\n@@Q %s %s@@\nq %s %s %s\n' "$i" "$NONCE" "$i" "$xr" "$xe"
}
prun() {
  printf 'P %s\n' "$i"
  (
    set +f
    [ "$tk" = - ] && tk=
    [ "$tk" = 1 ] && [ -n "$pK" ] && tk="=$pK $pS"
    IFS=,; set -- $kn; IFS=' '; kn="$*"
    IFS=,; set -- $ps; IFS=' '
    [ "$1" = - ] && set --
    [ "$kn" = - ] && kn=
    procs_fn "$rd" "$tk" "$md" "$kn" "$@"
  )
  printf '\n@@P %s %s@@\n' "$i" "$NONCE"
}
# an ask run aside (a, p): a background job whose answer goes to its own slot file, sent by the next J
# in the order asked; where no slot can be made it runs here and now (its answer comes first: answers
# are matched by id)
JN=0
JL=
slot() { [ -n "$BT" ] || return 1; JN=$((JN + 1)); [ "$JN" -gt "$JM" ] && JM=$JN; : > "$BT.j$JN"; }
while IFS= read -r line; do
  case $line in
    't '*)
      s=$\{line#t }
      printf 'B %s\n' "$s"
      for i in $dids; do eval "p=\$d_$i"; ld "$i" "$p"; done
      if [ -n "$BT" ] && [ -n "$fids" ]; then
        # every follow's stat from one find (not one each: thousands of files took a minute a frame);
        # then only the files that changed are read
        if [ "$FD" = 1 ]; then
          for i in $fids; do eval "p=\$f_$i"; printf '%s %s\n' "$i" "$p"; done > "$BT.fl"
          cut -d' ' -f2- "$BT.fl" > "$BT.fp"; FD=0
        fi
        xargs -d '\n' sh -c 'exec find -L "$@" -maxdepth 0 -printf "%i %s %T@ %y %m %p\n"' sh < "$BT.fp" > "$BT.fs"
        awk 'NR == FNR { p = $0; sub(/^[^ ]+ /, "", p); id[++n] = $1; at[n] = p; next }
          { p = $0; sub(/^[^ ]+ [^ ]+ [^ ]+ [^ ]+ [^ ]+ /, "", p); st[p] = $1 " " $2 " " $3 " " $4 " " $5 }
          END { for (k = 1; k <= n; k++) print id[k], (at[k] in st ? st[at[k]] : "-") }' "$BT.fl" "$BT.fs" > "$BT.s"
        while read -r i PST; do
          num "$i" || continue
          eval "p=\$f_$i; o=\$o_$i; n=\$n_$i; x=\$x_$i"
          rd f "$i" "$o" "$n" "$x" "$p"
          eval "o_$i=\$R_OFF; n_$i=\$R_INO"
        done < "$BT.s"
        PST=
      else
        for i in $fids; do
          eval "p=\$f_$i; o=\$o_$i; n=\$n_$i; x=\$x_$i"
          rd f "$i" "$o" "$n" "$x" "$p"
          eval "o_$i=\$R_OFF; n_$i=\$R_INO"
        done
      fi
      printf 'Z %s\n' "$s" ;;
    'd '*)
      r=$\{line#d }; i=$\{r%% *}; p=$\{r#* }; p=$\{p%|}
      num "$i" || continue
      eval "d_$i=\$p; lp_$i="; rmid "$dids" "$i"; dids="$out $i" ;;
    'f '*)
      pf "$\{line#f }" || continue
      eval "f_$i=\$p; o_$i=\$off; n_$i=\$ino; x_$i=\$max; sp_$i="; rmid "$fids" "$i"; fids="$out $i"; FD=1 ;;
    'u '*|'g '*)
      # stop listing (u) or following (g) an id
      i=$\{line#? }; num "$i" || continue
      case $line in u*) rmid "$dids" "$i"; dids=$out;; *) rmid "$fids" "$i"; fids=$out; FD=1;; esac ;;
    'o '*)
      pf "$\{line#o }" || continue
      rd o "$i" "$off" "$ino" "$max" "$p" ;;
    'b '*)
      # bulk first reads: N lines "PATH|" follow. One find for every stat (y lines; R = c for a file
      # in the bytes), one cat for the small settled files' bytes (Y BID TOT + bytes), one find after
      # it to prove none changed (w lines), X BID.
      r=$\{line#b }; bi=$\{r%% *}; n=$\{r#* }
      num "$bi" && num "$n" || continue
      : > "$BT"; j=0
      while [ "$j" -lt "$n" ] && IFS= read -r x; do printf '%s\n' "$\{x%|}" >> "$BT"; j=$((j + 1)); done
      [ -n "$BT" ] || { printf 'X %s\n' "$bi"; continue; }
      now=$(date +%s)
      yo=$(xargs -d '\n' sh -c 'exec find -L "$@" -maxdepth 0 \( -readable -printf "y r " -o -printf "y u " \) -printf "%i %s %T@ %y %m %p\n"' sh < "$BT" |
        awk -v cap=262144 -v now="$now" -v f="$BT.c" 'BEGIN { printf "" > f }
          $2 == "r" && $6 == "f" && $4 <= cap && $5 < now - 2 { p = $0; sub(/^[^ ]+ [^ ]+ [^ ]+ [^ ]+ [^ ]+ [^ ]+ [^ ]+ /, "", p); print p > f; t += $4; print "y c " substr($0, 5); next }
          { print } END { print "T " t + 0 }')
      tot=$\{yo##*T }; yo=$\{yo%T *}
      num "$tot" || tot=0
      [ -n "$yo" ] && printf '%s' "$yo"
      printf 'Y %s %s\n' "$bi" "$tot"
      # the bytes go out on fd 3 (the loop's stdout); cat's exit comes back on fd 4: a file it could
      # not read (gone, no permission since the find) came short and shifted every file after it
      cr=0
      if [ "$tot" -gt 0 ]; then cr=$( { { $TO xargs -d '\n' cat -- < "$BT.c"; echo "$?" >&4; cat /dev/zero; } | head -c "$tot" >&3; } 4>&1 ); fi
      [ "$tot" -gt 0 ] && xargs -d '\n' sh -c 'exec find -L "$@" -maxdepth 0 -printf "w %i %s %T@ %p\n"' sh < "$BT.c"
      printf 'X %s %s\n' "$bi" "$cr" ;;
    'P '*|'p '*)
      r=$\{line#? }; i=$\{r%% *}; r=$\{r#* }; tk=$\{r%% *}; r=$\{r#* }; md=$\{r%% *}; r=$\{r#* }
      kn=$\{r%% *}; r=$\{r#* }; ps=$\{r%% *}; rd=$\{r#* }; rd=$\{rd%|}
      num "$i" || continue
      case "$tk$md$kn$ps" in *[!0-9a-z,-]*) continue;; esac
      if [ "$\{line%% *}" = p ] && slot; then prun 3>>"$BT.j$JN" 1>&3 </dev/null & eval "JP_$JN=\$!"; JL="$JL $JN"
      else prun; fi ;;
    'x '*|'a '*)
      r=$\{line#? }; i=$\{r%% *}; n=$\{r#* }
      num "$i" && num "$n" || continue
      set --; j=0
      while [ "$j" -lt "$n" ] && IFS= read -r a; do set -- "$@" "$\{a%|}"; j=$((j + 1)); done
      [ "$j" = "$n" ] && [ "$n" -gt 0 ] || continue
      sc=$1; shift
      if [ "$\{line%% *}" = a ] && slot; then xrun "$@" 3>>"$BT.j$JN" 1>&3 </dev/null & eval "JP_$JN=\$!"; JL="$JL $JN"
      else xrun "$@"; fi ;;
    J)
      # the asks run aside since the last J, their answers in the order asked: the first as soon as
      # it has ended (a look: its asker reads it while the others end), then the others together
      set -- $JL
      if [ $# -gt 0 ]; then
        k1=$1; eval "wait \$JP_$k1"; cat -- "$BT.j$k1"
        wait
        set --; for k in $JL; do [ "$k" = "$k1" ] || set -- "$@" "$BT.j$k"; done
        [ $# -gt 0 ] && cat -- "$@"
      fi
      JN=0; JL= ;;
    'w '*)
      r=$\{line#w }; i=$\{r%% *}; r=$\{r#* }; ns=$\{r%% *}; r=$\{r#* }; na=$\{r%% *}; nd=$\{r#* }
      num "$i" && num "$ns" && num "$na" && num "$nd" || continue
      # lines are read even when some number is off, so the next command starts where it should
      sc=; j=0
      while [ "$j" -lt "$ns" ] && IFS= read -r a; do
        if [ "$j" = 0 ]; then sc=$\{a%|}; else sc="$sc$NL$\{a%|}"; fi; j=$((j + 1))
      done
      [ "$j" = "$ns" ] || continue
      set --; j=0
      while [ "$j" -lt "$na" ] && IFS= read -r a; do set -- "$@" "$\{a%|}"; j=$((j + 1)); done
      [ "$j" = "$na" ] || continue
      dt=; j=0
      while [ "$j" -lt "$nd" ] && IFS= read -r a; do
        if [ "$j" = 0 ]; then dt=$\{a%|}; else dt="$dt$NL$\{a%|}"; fi; j=$((j + 1))
      done
      [ "$j" = "$nd" ] && [ "$ns" -gt 0 ] || continue
      printf 'Q %s\n' "$i"
      if [ "$nd" = 0 ]; then xe=$($TO sh -c "$sc" sh "$@" </dev/null 2>&1 1>&3); xr=$?
      else xe=$(printf '%s' "$dt" | $TO sh -c "$sc" sh "$@" 2>&1 1>&3); xr=$?; fi
      dt=
      if [ "$xr" = 0 ] || [ -z "$xe" ]; then xe=; else xe=$(printf '%s\n' "$xe" | tail -n 1); fi
      printf '\n@@Q %s %s@@\nq %s %s %s\n' "$i" "$NONCE" "$i" "$xr" "$xe" ;;
    'k '*)
      r=$\{line#k }; sg=$\{r%% *}; i=$\{r#* }
      num "$i" || continue
      case $sg in TERM|KILL) kill -s "$sg" -- -"$i" || kill -s "$sg" "$i" ;; esac ;;
  esac
done
`
  .replace(/\$\\\{/g, '${')
  .replace('@@PROC_SCRIPT@@', () => PROC_SCRIPT);
