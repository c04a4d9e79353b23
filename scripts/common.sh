# Shared by scripts/quickstart and scripts/test: install what is missing, configure, build.
# Sourced, not run. Idempotent: apt-get runs only when a package is missing.

HYPERPACK_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
HYPERPACK_BUILD="${HYPERPACK_BUILD:-$HYPERPACK_ROOT/build}"

# Debian bookworm packages the build and the examples need (scripts/quickstart installs these).
HYPERPACK_PACKAGES=(
  # Ninja: builds on 2 cores about 5% sooner than make (it starts a target's compiles before
  # the libraries it links are linked).
  g++ cmake make ninja-build pkg-config
  # The linker (CMakeLists.txt: it links the sanitizer build's programs in a quarter of GNU ld's
  # time).
  lld
  libyaml-cpp-dev libsqlite3-dev libcxxopts-dev nlohmann-json3-dev libboost1.81-dev
  # --storage postgresql://...
  libpq-dev
  libeigen3-dev liblbfgspp-dev libssl-dev
  # hyperpack serve --metrics.
  prometheus-cpp-dev
  libtorch-dev libgloo-dev zlib1g-dev
  # Debian's libtorch multiplies matrices through the system BLAS; OpenBLAS is 6x the reference.
  libopenblas0-pthread
  # The build configures its tests too (tests/CMakeLists.txt finds GoogleTest).
  libgtest-dev libgmock-dev
  # The study page inlines Chart.js at build time.
  libjs-chart.js
  # The examples: Fashion-MNIST, and examples/fmnist_softmax's NumPy trainer.
  dataset-fashion-mnist python3 python3-numpy
  # The Python module (python/: hyperpack.optuna.GPSampler), built for /usr/bin/python3, and the
  # Optuna its example (examples/optuna) runs in.
  pybind11-dev python3-dev python3-optuna
)
# What scripts/test needs besides.
HYPERPACK_TEST_PACKAGES=(
  # scripts/cluster-certs (the TLS tests' certificates) runs the openssl command line.
  openssl
  # cpack's .deb (tests/package_test.cc): dpkg-shlibdeps finds the package's dependencies.
  dpkg-dev
  # The fuzzers: clang, and libFuzzer's runtime, which clang-14 only recommends.
  clang libclang-rt-14-dev
  # Peers the tests check against: Optuna opens the Optuna export (python3-optuna is installed
  # above); the trainer is compared with PyTorch.
  python3-torch
  # The launchers' exports are read by their consumers' own parsers: OmegaConf (Hydra, Lightning).
  python3-omegaconf
  # The study page's tests load it in headless chromium.
  chromium
  # The Slurm tests start a real one-node cluster (tests/local_slurm.h).
  slurmctld slurmd slurm-client munge
  # The storage tests start a throwaway PostgreSQL server (tests/local_postgres.h).
  postgresql-15
  # The Python module's tests (tests/python/).
  python3-pytest
)

hp_log() { printf '\033[1m==> %s\033[0m\n' "$*"; }

# hp_install_missing PACKAGE...: apt-get installs those not installed.
hp_install_missing() {
  local missing=() pkg
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    hp_log "all $# packages present"
    return
  fi
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  hp_log "installing: ${missing[*]}"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# The builds' optimisation and debug flags. -g1 (line tables: a backtrace or a sanitizer's report
# still names file and line) rather than -g, whose full debug information made every compile take
# about half as long again; the fuzzer build uses -O1, which halves its compiles again, and the
# sanitizer build -O0 (UBSan's checks at -O1 doubled some compiles; tuner/ keeps -O1 there, as its
# Eigen loops run 20 times slower at -O0 under ASan). Set HYPERPACK_CXX_FLAGS to build otherwise
# (e.g. "-O0 -g" to step through in a debugger).
HYPERPACK_CXX_FLAGS="${HYPERPACK_CXX_FLAGS:--O2 -g1 -DNDEBUG}"
HYPERPACK_CHECK_FLAGS="-O1 -g1 -DNDEBUG"
HYPERPACK_SANITIZE_FLAGS="-O0 -g1 -DNDEBUG"

# The generator for build folder DIR: the one it was configured with, else Ninja (else make).
hp_generator() {
  local cache="$1/CMakeCache.txt"
  if [ -f "$cache" ]; then
    sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' "$cache"
  elif command -v ninja >/dev/null; then
    echo Ninja
  else
    echo "Unix Makefiles"
  fi
}

# Configures build/ and builds TARGETs there (all when none): hp_build [TARGET...].
hp_build() {
  local jobs
  jobs="$(nproc 2>/dev/null || echo 2)"
  hp_log "configuring in $HYPERPACK_BUILD"
  cmake -S "$HYPERPACK_ROOT" -B "$HYPERPACK_BUILD" -G "$(hp_generator "$HYPERPACK_BUILD")" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=$HYPERPACK_CXX_FLAGS" >/dev/null
  hp_log "building ${*:-everything} with $jobs jobs"
  cmake --build "$HYPERPACK_BUILD" -j "$jobs" ${1:+--target "$@"}
}

# Runs a command as one named stage of a script and says how long it took; hp_stages_summary
# lists every stage's time at the end.
HYPERPACK_STAGES=()
hp_stage() {
  local name="$1" start=$SECONDS
  shift
  hp_log "$name"
  "$@"
  HYPERPACK_STAGES+=("$(printf '%5d s  %s' $((SECONDS - start)) "$name")")
  hp_log "$name: $((SECONDS - start)) s"
}

hp_stages_summary() {
  hp_log "time per stage"
  printf '%s\n' "${HYPERPACK_STAGES[@]}"
}

# Configures `dir` with the given cmake arguments and builds `targets` there (all when none), with
# HYPERPACK_CHECK_FLAGS (a checking build: sanitizers, fuzzers): hp_build_in DIR "TARGET..." ARG...
hp_build_in() {
  local dir="$1" targets=() jobs
  read -r -a targets <<<"$2"
  shift 2
  jobs="$(nproc 2>/dev/null || echo 2)"
  cmake -S "$HYPERPACK_ROOT" -B "$dir" -G "$(hp_generator "$dir")" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=$HYPERPACK_CHECK_FLAGS" "$@" >/dev/null
  cmake --build "$dir" -j "$jobs" ${targets[@]+--target "${targets[@]}"}
}
