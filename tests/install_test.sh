#!/bin/sh
# Installing (no GPU needed): `cmake --install` of this build into a temporary prefix; the
# installed command converts a capture and injects the installed library; a C API program builds
# against the installed CMake package and against pkg-config, and runs; `cpack -G DEB` makes a
# .deb with the right dependencies and files. With CI=true, as root, the .deb is also installed
# with apt-get, used, and removed again.
# shellcheck disable=SC2016 # sh -c 'echo "$VAR"': what the traced command sees
set -u
build=$CUPTRACE_BUILD_DIR
cache=$build/CMakeCache.txt
cached() { sed -n "s/^$1:[A-Z]*=//p" "$cache"; }
cmake=$(cached CMAKE_COMMAND)
cpack=$(cached CMAKE_CPACK_COMMAND)
cc=$(cached CMAKE_C_COMPILER)
: "${cmake:=cmake}" "${cpack:=cpack}" "${cc:=cc}"
version=$(cached CMAKE_PROJECT_VERSION)
libdir=$(cached CMAKE_INSTALL_LIBDIR)
for tool in "$cmake" "$cpack" "$cc" pkg-config dpkg-deb readelf; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "SKIP: $tool not found (install_test needs cmake, cpack, a C compiler, pkg-config, dpkg-deb and readelf)"
		exit 77
	fi
done
if [ ! -f "$build/CPackConfig.cmake" ]; then
	echo "SKIP: no CPackConfig.cmake in $build"
	exit 77
fi
# A sanitized build installs a sanitized library: what links it must load the sanitizers first.
san=""
grep -q '^CUPTRACE_SANITIZE:BOOL=ON' "$cache" && san="-fsanitize=address,undefined"
# ctest points CUPTRACE_LIB at the build's library; the installed command must find its own.
unset CUPTRACE_LIB

tmp=$(mktemp -d "${CUPTRACE_TMP:-/tmp}/install.XXXXXX")
prefix=$tmp/prefix
n=0 failed=0
pass() { n=$((n + 1)); }
fail() {
	echo "FAIL: $*"
	failed=$((failed + 1))
}
# want-exit want-output-regex ("": any) command...: output is stdout and stderr together.
expect() {
	e_want=$1 e_msg=$2
	shift 2
	"$@" >"$tmp/out" 2>&1
	e_got=$?
	if [ "$e_got" != "$e_want" ] || { [ -n "$e_msg" ] && ! grep -q -- "$e_msg" "$tmp/out"; }; then
		fail "$* -> exit $e_got (want $e_want and '$e_msg'), output:"
		tail -n 30 "$tmp/out"
	else
		pass
	fi
}

# 1. cmake --install: the files, nothing else, and run paths without the build's runtime-libs.
expect 0 "Installing: $prefix/bin/cuptrace" "$cmake" --install "$build" --prefix "$prefix"
files="bin/cuptrace
$libdir/libcuptrace.so
$libdir/libcuptrace_preload.so
include/cuptrace.h
share/cuptrace/python/sitecustomize.py
share/cuptrace/python/pyproject.toml
share/cuptrace/python/cuptrace_build.py
share/cuptrace/python/cuptrace/__init__.py
share/cuptrace/python/cuptrace/_lib.py
share/cuptrace/python/cuptrace/_options.py
share/cuptrace/python/cuptrace/_session.py
share/cuptrace/python/cuptrace/_torch.py
share/cuptrace/python/cuptrace/callbacks.py
share/cuptrace/python/cuptrace/errors.py
share/cuptrace/python/cuptrace/result.py
share/cuptrace/python/cuptrace/py.typed
$libdir/cmake/cuptrace/cuptraceConfig.cmake
$libdir/cmake/cuptrace/cuptraceConfigVersion.cmake
$libdir/cmake/cuptrace/cuptraceTargets.cmake
$libdir/pkgconfig/cuptrace.pc"
for f in $files; do
	if [ -f "$prefix/$f" ]; then pass; else fail "not installed: $f"; fi
done
extra=$(cd "$prefix" && find . -type f | sed 's|^\./||' | grep -v -x -F "$files" |
	grep -v -x "$libdir/cmake/cuptrace/cuptraceTargets-[a-z]*\.cmake")
if [ -z "$extra" ]; then pass; else fail "installed but not expected: $extra"; fi
rp_lib=$(readelf -d "$prefix/$libdir/libcuptrace.so" | grep -E 'RUNPATH|RPATH')
rp_bin=$(readelf -d "$prefix/bin/cuptrace" | grep -E 'RUNPATH|RPATH')
case "$rp_lib$rp_bin" in
*runtime-libs* | *ORIGIN*) fail "installed run paths still point into the build: $rp_lib $rp_bin" ;;
*) pass ;;
esac
if ldd "$prefix/$libdir/libcuptrace.so" | grep -q 'not found'; then
	fail "the installed libcuptrace.so misses libraries:"
	ldd "$prefix/$libdir/libcuptrace.so"
else
	pass
fi

# The installed command converts and reads a capture ...
ct=$prefix/bin/cuptrace
expect 0 "" "$ct" convert "$CUPTRACE_TEST_DATA/vector_add.cupti" -o "$tmp/x.pftrace"
if [ -s "$tmp/x.pftrace" ]; then pass; else fail "convert wrote no trace"; fi
expect 0 "vector_add" "$ct" stats "$tmp/x.pftrace"
expect 0 "usage: cuptrace record" "$ct" record --help
# ... and injects the installed library (a program without CUDA: no trace, but no 'not found'),
# with --pytorch's hook from the installed share/cuptrace/python.
lib_real=$(readlink -f "$prefix/$libdir/libcuptrace.so")
py_real=$(readlink -f "$prefix/share/cuptrace/python")
expect 0 "no trace was written" "$ct" record --no-check -o "$tmp/y.pftrace" -- true
expect 0 "^$lib_real\$" "$ct" record --no-check -o "$tmp/y.pftrace" -- \
	sh -c 'echo "$CUDA_INJECTION64_PATH"'
expect 0 "^$py_real" "$ct" record --no-check --pytorch -o "$tmp/y.pftrace" -- \
	sh -c 'echo "$PYTHONPATH"'

# 2. A C API program, built against the installed CMake package and through pkg-config. Without
# a GPU cuptrace_start fails with a message; it must link, load and return.
mkdir -p "$tmp/api"
cat >"$tmp/api/api_user.c" <<'EOF'
#include <cuptrace.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	int r = cuptrace_start(argc > 1 ? argv[1] : NULL);
	printf("cuptrace_start: %d\n", r);
	if (r == 0)
		printf("cuptrace_stop: %d\n", cuptrace_stop());
	return 0;
}
EOF
cat >"$tmp/api/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.20)
project(api_user C)
find_package(cuptrace $version REQUIRED)
message(STATUS "cuptrace \${cuptrace_VERSION} from \${cuptrace_DIR}")
add_executable(api_user api_user.c)
target_link_libraries(api_user cuptrace::cuptrace)
EOF
expect 0 "cuptrace $version from $prefix/$libdir/cmake/cuptrace" \
	"$cmake" -S "$tmp/api" -B "$tmp/api/build" -DCMAKE_PREFIX_PATH="$prefix" \
	-DCMAKE_C_COMPILER="$cc" -DCMAKE_C_FLAGS="$san" -DCMAKE_EXE_LINKER_FLAGS="$san"
expect 0 "" "$cmake" --build "$tmp/api/build"
expect 0 "cuptrace_start:" "$tmp/api/build/api_user" "$tmp/api/cmake.pftrace"
if ldd "$tmp/api/build/api_user" | grep -q "$prefix/$libdir/libcuptrace.so"; then
	pass
else
	fail "api_user (CMake) does not load the installed libcuptrace.so:"
	ldd "$tmp/api/build/api_user"
fi
export PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig"
expect 0 "^$version\$" pkg-config --modversion cuptrace
pc=$(pkg-config --cflags --libs cuptrace)
pc_libdir=$(pkg-config --variable=libdir cuptrace)
# shellcheck disable=SC2086 # word splitting of the flags is intended
expect 0 "" "$cc" $san "$tmp/api/api_user.c" $pc -Wl,-rpath,"$pc_libdir" -o "$tmp/api/api_pc"
expect 0 "cuptrace_start:" "$tmp/api/api_pc" "$tmp/api/pc.pftrace"

# 3. cpack -G DEB: dependencies, files, and what is inside (prefix /usr).
mkdir -p "$tmp/deb"
expect 0 "generated" "$cpack" -G DEB --config "$build/CPackConfig.cmake" -B "$tmp/deb"
deb=""
for f in "$tmp/deb"/cuptrace_*.deb; do
	[ -f "$f" ] && deb=$f
done
if [ -n "$deb" ]; then
	pass
	depends=$(dpkg-deb -f "$deb" Depends)
	echo "Depends: $depends"
	for d in libprotobuf-c1 zlib1g libc6; do
		case ", $depends" in
		*", $d"[\ ,]* | *", $d") pass ;;
		*) fail "Depends lacks $d: $depends" ;;
		esac
	done
	expect 0 "^Package: cuptrace$" dpkg-deb -f "$deb" Package Version Maintainer
	expect 0 "^Version: $version$" dpkg-deb -f "$deb" Package Version Maintainer
	expect 0 "^Maintainer: ." dpkg-deb -f "$deb" Package Version Maintainer
	dpkg-deb -c "$deb" | awk '{print $NF}' >"$tmp/deb/list"
	for f in $files; do
		if grep -q -x "\./usr/$f" "$tmp/deb/list"; then pass; else fail "not in the .deb: $f"; fi
	done
	if grep -q -i 'test\|example\|cupti_floor\|bench\|runtime-libs' "$tmp/deb/list"; then
		fail "the .deb holds more than cuptrace:"
		grep -i 'test\|example\|cupti_floor\|bench\|runtime-libs' "$tmp/deb/list"
	else
		pass
	fi
	dpkg-deb -x "$deb" "$tmp/deb/root"
	expect 0 "^prefix=/usr$" cat "$tmp/deb/root/usr/$libdir/pkgconfig/cuptrace.pc"
	rp=$(readelf -d "$tmp/deb/root/usr/$libdir/libcuptrace.so" | grep -E 'RUNPATH|RPATH')
	case "$rp" in
	*runtime-libs* | *ORIGIN* | *_CPack_Packages*) fail "the .deb's library has run path $rp" ;;
	*) pass ;;
	esac
else
	fail "cpack made no .deb:"
	cat "$tmp/out"
fi

# 4. CI only, as root: apt-get installs the .deb (and its dependencies), the installed command
# works from /usr/bin, and apt-get removes it again. Never replaces a cuptrace already installed.
if [ "${CI:-}" = true ] && [ "$(id -u)" = 0 ] && [ -n "$deb" ]; then
	if dpkg-query -W -f '${Status}' cuptrace 2>/dev/null | grep -q 'installed$'; then
		echo "note: a cuptrace package is already installed: apt-get step left out"
	else
		apt_opts="-y -q -o DPkg::Lock::Timeout=120"
		# shellcheck disable=SC2086
		expect 0 "" env DEBIAN_FRONTEND=noninteractive apt-get install $apt_opts "$deb"
		expect 0 "" /usr/bin/cuptrace convert "$CUPTRACE_TEST_DATA/vector_add.cupti" \
			-o "$tmp/apt.pftrace"
		expect 0 "vector_add" /usr/bin/cuptrace stats "$tmp/apt.pftrace"
		expect 0 "^/usr/$libdir/libcuptrace.so\$" /usr/bin/cuptrace record --no-check \
			-o "$tmp/y.pftrace" -- sh -c 'echo "$CUDA_INJECTION64_PATH"'
		# shellcheck disable=SC2086
		expect 0 "" env DEBIAN_FRONTEND=noninteractive apt-get remove --purge $apt_opts cuptrace
		if [ -e /usr/bin/cuptrace ] || dpkg-query -W cuptrace >/dev/null 2>&1; then
			fail "cuptrace left after apt-get remove --purge"
		else
			pass
		fi
	fi
else
	echo "note: apt-get install of the .deb runs only with CI=true as root"
fi

echo "$n passed, $failed failed"
[ "$failed" = 0 ] && rm -rf "$tmp"
[ "$failed" = 0 ]
