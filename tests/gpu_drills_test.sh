#!/bin/sh
# GPU test: the drills of the field. Traced programs that launch from many threads, lose
# buffers, fill the disk, fork, exec, reset the device, never use CUDA, or cycle the C API: each
# gives exact counts where nothing was lost, counted drops where something was, its own exit
# status, one complete trace per CUDA process and nothing leaked. Skips without a GPU.
set -u
# shellcheck source=tests/gpu_common.sh
gpu_test=drills
. "$(dirname "$0")/gpu_common.sh"
drill=$(dirname "$chk")/drill
cycles=$(dirname "$chk")/capi_cycles
src=$(cd "$(dirname "$0")/.." && pwd)
fail=0
bad() { echo "FAIL $*"; fail=1; }
# Perfetto's trace processor and our reader agree on the counts: tpc TRACE [tp_check options].
dropped() { # TRACE -> "Dropped records" of cuptrace stats
	"$ct" stats "$1" | sed -n 's/^Dropped records: *\([0-9]*\).*/\1/p'
}
kernels() { # TRACE -> kernel slices, from cuptrace stats (0 if none)
	"$ct" stats "$1" | awk '$1 == "kernel" && $2 ~ /^[0-9]+$/ {print $2; f = 1; exit} END {if (!f) print 0}'
}
# Traces worth a second look elsewhere (Perfetto's trace processor is not on GPU machines).
keep() { [ -n "${CUPTRACE_KEEP:-}" ] && mkdir -p "$CUPTRACE_KEEP" && cp "$1" "$CUPTRACE_KEEP/$2"; :; }

# -- 16 host threads x 8 streams, each stream a copy in, 50 kernels, a copy out, concurrently.
# Every kernel and copy arrives, each with its flow from the call that queued it.
k=$((16 * 8 * 50)) c=$((16 * 8 * 2))
if timeout 120 "$ct" record -o "$tmp/th.pftrace" -- "$drill" threads 16 8 50 >"$tmp/th.log" 2>&1 &&
	keep "$tmp/th.pftrace" threads.pftrace &&
	"$chk" "$tmp/th.pftrace" --clean --count kernel=$k --count memcpy=$c \
		--count cuda_runtime:cudaLaunchKernel=$k --count cuda_runtime:cudaMemcpyAsync=$c \
		--flows $((k + c)) --threads drill=17 &&
	tp_check "$tmp/th.pftrace" --category kernel=$k --category memcpy=$c --flows $((k + c)); then
	echo "ok threads: 16 threads x 8 streams, $k kernels, $c copies, $((k + c)) flows"
else
	bad "threads"; tail -5 "$tmp/th.log"
fi

# -- Tiny buffers and a one-buffer queue under a launch storm: whatever cuptrace cannot keep is
# counted (summary and file agree), nothing hangs, the file loads, and no kernel is unaccounted.
k=$((8 * 20000))
if CUPTRACE_QUEUE=1 timeout 180 "$ct" record --buffer-size 8192 -o "$tmp/tiny.pftrace" -- \
	"$drill" burst 8 20000 >"$tmp/tiny.log" 2>&1; then
	line=$(grep "dropped records:" "$tmp/tiny.log")
	a=$(echo "$line" | sed -n 's/.*dropped records: \([0-9]*\) by CUPTI, \([0-9]*\) by cuptrace.*/\1/p')
	b=$(echo "$line" | sed -n 's/.*dropped records: \([0-9]*\) by CUPTI, \([0-9]*\) by cuptrace.*/\2/p')
	got=$(kernels "$tmp/tiny.pftrace")
	keep "$tmp/tiny.pftrace" tiny.pftrace
	inf=$(dropped "$tmp/tiny.pftrace")
	echo "tiny buffers: $got of $k kernels in the file; dropped ${a:-?} by CUPTI, ${b:-?} by cuptrace; file says ${inf:-?}"
	if [ -n "$a" ] && [ -n "$b" ] && [ -n "$got" ] && [ "$inf" = $((a + b)) ] &&
		[ $((got + a + b)) -ge $k ] && { [ $((a + b)) -gt 0 ] || [ "$got" = $k ]; } &&
		"$chk" "$tmp/tiny.pftrace" --allow-unlinked $k >/dev/null && tp_check "$tmp/tiny.pftrace"; then
		echo "ok tiny buffers"
	else
		bad "tiny buffers"; tail -5 "$tmp/tiny.log"
	fi
else
	bad "tiny buffers: record failed or hung"; tail -5 "$tmp/tiny.log"
fi
# CUPTI itself short of buffers (every third request refused): it drops, cuptrace counts.
if CUPTRACE_FAULT_BUFFERS=3 timeout 180 "$ct" record --buffer-size 65536 -o "$tmp/refused.pftrace" -- \
	"$drill" burst 4 20000 >"$tmp/refused.log" 2>&1; then
	a=$(sed -n 's/.*dropped records: \([0-9]*\) by CUPTI.*/\1/p' "$tmp/refused.log")
	inf=$(dropped "$tmp/refused.pftrace")
	keep "$tmp/refused.pftrace" refused.pftrace
	echo "refused buffers: CUPTI dropped ${a:-?}; file says ${inf:-?}; $(kernels "$tmp/refused.pftrace") of 80000 kernels in the file"
	if [ "${a:-0}" -gt 0 ] && [ "$inf" -ge "$a" ] &&
		[ $(($(kernels "$tmp/refused.pftrace") + inf)) -ge 80000 ] && "$chk" "$tmp/refused.pftrace" --allow-unlinked 80000 >/dev/null; then
		echo "ok refused buffers"
	else
		bad "refused buffers"; tail -5 "$tmp/refused.log"
	fi
else
	bad "refused buffers: record failed or hung"; tail -5 "$tmp/refused.log"
fi

# -- The disk fills up (a 256 KiB tmpfs): the program's exit status stays its own, one message
# says what happened, and what was written loads. Needs a mount: root, or a user namespace.
full=$tmp/full
mkdir -p "$full"
cat >"$tmp/full.sh" <<EOF
mount -t tmpfs -o size=256k cuptrace-drill "$full" || exit 90
"$ct" record -o "$full/full.pftrace" -- "$drill" burst 4 100000 >"$tmp/full.log" 2>&1
st=\$?
cp "$full/full.pftrace" "$tmp/full-copy.pftrace"
umount "$full" 2>/dev/null
exit \$st
EOF
if [ "$(id -u)" = 0 ]; then runner="sh"; elif unshare -rm true 2>/dev/null; then runner="unshare -rm sh"; else runner=""; fi
if [ -z "$runner" ]; then
	echo "SKIP disk full: needs root or user namespaces to mount a small tmpfs"
else
	timeout 180 $runner "$tmp/full.sh"
	st=$?
	n=$(grep -c "No space left on device" "$tmp/full.log")
	echo "disk full: exit $st, $n message(s): $(grep -m1 "No space" "$tmp/full.log")"
	if [ "$st" = 90 ]; then
		echo "SKIP disk full: cannot mount a tmpfs here"
	elif keep "$tmp/full-copy.pftrace" full.pftrace && [ "$st" = 0 ] && [ "$n" = 1 ] && "$chk" "$tmp/full-copy.pftrace" --allow-unlinked 400000 --at-least kernel=1; then
		echo "ok disk full: $(wc -c <"$tmp/full-copy.pftrace") bytes kept"
	else
		bad "disk full"; tail -5 "$tmp/full.log"
	fi
fi

# -- fork without exec, CUDA only in the children, which end with _exit: one complete trace
# each, none from the parent (it never used CUDA).
mkdir -p "$tmp/ff"
if timeout 120 "$ct" record -o "$tmp/ff/ff.pftrace" -- "$drill" fork-first 3 >"$tmp/ff.log" 2>&1; then
	n=0
	for f in "$tmp"/ff/ff-*.pftrace; do
		"$chk" "$f" --clean --count kernel=2 >/dev/null && n=$((n + 1))
	done
	if [ "$n" = 3 ] && [ ! -e "$tmp/ff/ff.pftrace" ]; then
		echo "ok fork-first: 3 child traces with 2 kernels each"
	else
		bad "fork-first ($n complete child traces)"; ls -la "$tmp/ff"; cat "$tmp/ff.log"
	fi
else
	bad "fork-first: record failed"; cat "$tmp/ff.log"
fi
# A forked child that uses no CUDA and exits through exit(): the parent's trace is untouched.
mkdir -p "$tmp/fa"
if timeout 120 "$ct" record -o "$tmp/fa/fa.pftrace" -- "$drill" fork-after >"$tmp/fa.log" 2>&1 &&
	"$chk" "$tmp/fa/fa.pftrace" --clean --count kernel=2 >/dev/null &&
	[ "$(ls "$tmp/fa" | wc -l)" = 1 ]; then
	echo "ok fork-after: one trace, 2 kernels"
else
	bad "fork-after"; ls -la "$tmp/fa"; cat "$tmp/fa.log"
fi
# Two CUDA processes of one rank (a launcher's RANK=3 in both) and a name with %r: one keeps
# job-3.pftrace, the other writes job-3-<pid>.pftrace; both carry the rank in their metadata.
mkdir -p "$tmp/rk"
if RANK=3 LOCAL_RANK=1 WORLD_SIZE=4 timeout 120 "$ct" record -o "$tmp/rk/job-%r.pftrace" -- \
	"$drill" fork-first 2 >"$tmp/rk.log" 2>&1; then
	n=0
	for f in "$tmp"/rk/job-3.pftrace "$tmp"/rk/job-3-*.pftrace; do
		"$chk" "$f" --clean --count kernel=2 --meta rank --meta world_size >/dev/null 2>&1 &&
			"$ct" stats "$f" | grep -q "^rank: *3" && n=$((n + 1))
	done
	if [ "$n" = 2 ] && [ "$(ls "$tmp/rk" | wc -l)" = 2 ]; then
		echo "ok one rank, two processes: $(ls "$tmp/rk" | tr '\n' ' ')"
	else
		bad "one rank, two processes ($n good traces)"; ls -la "$tmp/rk"; cat "$tmp/rk.log"
	fi
else
	bad "one rank, two processes: record failed"; cat "$tmp/rk.log"
fi
# An exec chain: three images of one pid, three complete traces, none written over.
mkdir -p "$tmp/ec"
if timeout 120 "$ct" record -o "$tmp/ec/ec.pftrace" -- "$drill" exec-chain 3 >"$tmp/ec.log" 2>&1; then
	n=0
	for f in "$tmp"/ec/*.pftrace; do
		"$chk" "$f" --clean --count kernel=1 >/dev/null && n=$((n + 1))
	done
	if [ "$n" = 3 ]; then
		echo "ok exec-chain: $(ls "$tmp/ec" | tr '\n' ' ')"
	else
		bad "exec-chain ($n complete traces)"; ls -la "$tmp/ec"; cat "$tmp/ec.log"
	fi
else
	bad "exec-chain: record failed"; cat "$tmp/ec.log"
fi
# Python multiprocessing, spawn and fork, CUDA only in the workers.
if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
	for how in spawn fork; do
		mkdir -p "$tmp/mp-$how"
		if timeout 180 "$ct" record -o "$tmp/mp-$how/mp.pftrace" -- \
			python3 "$src/tests/gpu/mp_workers.py" "$how" 3 >"$tmp/mp-$how.log" 2>&1; then
			n=0 counts=""
			for f in "$tmp/mp-$how"/*.pftrace; do
				kc=$(kernels "$f")
				"$chk" "$f" --clean --at-least kernel=6 >/dev/null 2>&1 && n=$((n + 1)) counts="$counts $kc"
			done
			if [ "$n" = 3 ] && [ "$(echo "$counts" | tr ' ' '\n' | sort -u | grep -c .)" = 1 ]; then
				echo "ok multiprocessing $how: 3 worker traces, kernels:$counts"
			else
				bad "multiprocessing $how ($n traces, kernels:$counts)"; ls -la "$tmp/mp-$how"; tail -5 "$tmp/mp-$how.log"
			fi
		else
			bad "multiprocessing $how: record failed"; tail -5 "$tmp/mp-$how.log"
		fi
	done
else
	echo "SKIP multiprocessing: no PyTorch with CUDA"
fi

# -- cudaDeviceReset in the middle: all 5 kernels, on a clean timeline.
timeout 120 "$ct" record -o "$tmp/reset.pftrace" -- "$drill" reset >"$tmp/reset.log" 2>&1
keep "$tmp/reset.pftrace" reset.pftrace
if [ -s "$tmp/reset.pftrace" ] &&
	"$chk" "$tmp/reset.pftrace" --clean --count kernel=5 >/dev/null &&
	tp_check "$tmp/reset.pftrace" --category kernel=5; then
	echo "ok device reset: 5 kernels"
else
	bad "device reset"; "$chk" "$tmp/reset.pftrace" --clean --count kernel=5; tail -5 "$tmp/reset.log"
fi
# -- A program that never uses CUDA: its own exit status, a message, no file.
timeout 60 "$ct" record -o "$tmp/none.pftrace" -- "$drill" none 7 >"$tmp/none.log" 2>&1
st=$?
if [ "$st" = 7 ] && [ ! -e "$tmp/none.pftrace" ] && grep -q "no trace was written" "$tmp/none.log" &&
	grep -q "drill none" "$tmp/none.log"; then
	echo "ok no CUDA: exit 7, no file"
else
	bad "no CUDA (exit $st)"; cat "$tmp/none.log"
fi

# -- The C API: 100 start/stop cycles in one process. Every cycle's file holds its 3 kernels;
# descriptors, threads and heap do not grow with the cycles.
mkdir -p "$tmp/cy"
if CUPTRACE_SUMMARY=0 LD_LIBRARY_PATH="$(dirname "$CUPTRACE_LIB")" timeout 300 "$cycles" 100 "$tmp/cy" >"$tmp/cy.log" 2>&1; then
	line=$(grep "capi_cycles:" "$tmp/cy.log")
	echo "$line"
	n=0
	for i in $(seq 1 100); do
		"$chk" "$tmp/cy/cycle-$i.pftrace" --clean --count kernel=3 --flows 3 >/dev/null 2>&1 && n=$((n + 1))
	done
	set -- $(echo "$line" | sed 's/[^0-9 ]//g')
	# numbers: cycles, c1, c2, c3, fds x3, threads x3, heap x3, rss x3
	fds1=$5 fds3=$7 th1=$8 th3=${10} heap1=${11} heap3=${13}
	growth=$((heap3 - heap1))
	echo "capi cycles: $n of 100 files complete; heap grew $growth bytes over the last 90 cycles"
	if [ "$n" = 100 ] && [ "$fds1" = "$fds3" ] && [ "$th1" = "$th3" ] && [ "$growth" -lt 262144 ]; then
		echo "ok capi cycles"
	else
		bad "capi cycles"
	fi
else
	bad "capi cycles: program failed"; tail -5 "$tmp/cy.log"
fi
# LeakSanitizer over 20 cycles, where its runtime is there: no leak from libcuptrace.
lsan=${LSAN_LIB:-$(ls /usr/lib/x86_64-linux-gnu/liblsan.so.0 2>/dev/null || true)}
if [ -n "$lsan" ] && [ -e "$lsan" ] && [ -z "$(LD_PRELOAD="$lsan" true 2>&1)" ]; then
	mkdir -p "$tmp/cyl"
	printf 'leak:libcuda.so\nleak:libcudart\nleak:libnvidia\n' >"$tmp/lsan.supp"
	CUPTRACE_SUMMARY=0 LD_PRELOAD="$lsan" LSAN_OPTIONS="suppressions=$tmp/lsan.supp:exitcode=23" \
		LD_LIBRARY_PATH="$(dirname "$CUPTRACE_LIB")" timeout 300 "$cycles" 20 "$tmp/cyl" >"$tmp/cyl.log" 2>&1
	st=$?
	# Ours: a leak allocated by libcuptrace itself (frame #1, the caller of malloc). CUPTI's
	# own allocations (made inside cuptiSubscribe, cuptiActivityEnableAndDump, ... and kept
	# by CUPTI across sessions) pass through our frames further down, and are CUPTI's.
	ours=$(awk '/^(Direct|Indirect) leak/ {blk=1; next} blk && /^ *#1 / {if ($0 ~ /libcuptrace/) n++; blk=0} END {print n+0}' "$tmp/cyl.log")
	echo "lsan: exit $st; $(grep -m1 "SUMMARY" "$tmp/cyl.log" || echo "no leak summary"); $ours leaks allocated in libcuptrace"
	if [ "$ours" = 0 ] && { [ "$st" = 0 ] || [ "$st" = 23 ]; }; then
		echo "ok lsan: nothing leaked from libcuptrace"
	else
		bad "lsan"; grep -B2 -A12 "libcuptrace" "$tmp/cyl.log" | head -60
	fi
else
	echo "SKIP lsan: no LeakSanitizer runtime that loads here (liblsan.so.0; set LSAN_LIB)"
fi
rm -rf "$tmp"
exit $fail
