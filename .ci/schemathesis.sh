#!/usr/bin/env bash
# The served OpenAPI document, checked from outside: `api dev` on a free port in a temporary
# folder, then openapi-spec-validator on /openapi.json, then schemathesis against the running
# service under both servers the document declares (`/v1` and `/`). Exits non-zero on any failure.
#
# Knobs: SCHEMATHESIS_MAX_EXAMPLES (default 20 per operation), SCHEMATHESIS_SEED (default random;
# .ci/run fixes one so that a CI run is repeatable), SCHEMATHESIS_VENV (where the tools are installed),
# SCHEMATHESIS_TIMEOUT (hard limit in seconds per run, default 600; a run takes about 30 s),
# SCHEMATHESIS_EXTRA (more CLI options). Not --max-time: schemathesis repeats fuzzing until it is
# spent.
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-${TMPDIR:-/tmp}/vas-target}"
max_examples="${SCHEMATHESIS_MAX_EXAMPLES:-20}"
run_timeout="${SCHEMATHESIS_TIMEOUT:-600}"
python="${PYTHON:-python3}"

# The checks that must hold: no 5xx, every status/content type/header/body as documented, 405 for
# undocumented methods, and required headers really required. (Not run: positive_data_acceptance
# and negative_data_rejection, which need rules a schema cannot state: see api/src/openapi.rs.)
checks="not_a_server_error,status_code_conformance,content_type_conformance"
checks+=",response_headers_conformance,response_schema_conformance"
checks+=",missing_required_header,unsupported_method"

# The tools live in their own virtualenv outside the clone (reused by later runs), so nothing is
# installed into the system's Python.
venv="${SCHEMATHESIS_VENV:-${TMPDIR:-/tmp}/vas-ci-venv}"
if [[ ! -x "$venv/bin/schemathesis" || ! -x "$venv/bin/openapi-spec-validator" ]]; then
  echo "schemathesis.sh: installing schemathesis and openapi-spec-validator into $venv"
  "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    "openapi-spec-validator>=0.7,<0.8" "schemathesis>=4,<5"
fi
export PATH="$venv/bin:$PATH"

cargo build --quiet -p api-bin

work="$(mktemp -d)"
pid=""
cleanup() {
  if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# Port 0: the service picks a free port and prints its address. The limit on failed
# authentications per address is off here: the fuzzer sends thousands of keyless requests from one
# address, and past the limit every operation would only answer 429 (the limit has its own tests).
(
  cd "$work"
  VAS_HTTP__BIND=127.0.0.1:0 VAS_LIMITS__AUTH_FAILURES_PER_MINUTE=0 \
    exec "$CARGO_TARGET_DIR/debug/api" dev >"$work/stdout" 2>"$work/stderr"
) &
pid=$!

base=""
key=""
for _ in $(seq 120); do
  base="$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$work/stdout" | head -n1 || true)"
  key="$(grep -o 'sk_test_[A-Za-z0-9]*' "$work/stdout" | head -n1 || true)"
  if [[ -n "$base" && -n "$key" ]] && curl -fsS "$base/healthz" >/dev/null 2>&1; then
    break
  fi
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "schemathesis.sh: api dev exited" >&2
    cat "$work/stdout" "$work/stderr" >&2
    exit 1
  fi
  sleep 0.5
done
if [[ -z "$base" || -z "$key" ]] || ! curl -fsS "$base/healthz" >/dev/null 2>&1; then
  echo "schemathesis.sh: api dev did not become healthy" >&2
  tail -n 50 "$work/stderr" >&2
  exit 1
fi
echo "schemathesis.sh: api dev at $base"

curl -fsS "$base/openapi.json" -o "$work/openapi.json"
curl -fsS "$base/v1/openapi.json" -o "$work/openapi-v1.json"
cmp -s "$work/openapi.json" "$work/openapi-v1.json" || {
  echo "schemathesis.sh: /openapi.json and /v1/openapi.json differ" >&2
  exit 1
}
openapi-spec-validator "$work/openapi.json"

seed_args=()
if [[ -n "${SCHEMATHESIS_SEED:-}" ]]; then seed_args=(--seed "$SCHEMATHESIS_SEED"); fi

status=0
for server in /v1 /; do
  echo "schemathesis.sh: schemathesis on ${base}${server%/}"
  # From the temporary folder: schemathesis keeps a cache (.schemathesis/) in its working folder.
  # One worker: with threads, Hypothesis on Python 3.11 can fail inside `ast` ("AST constructor
  # recursion depth mismatch", a CPython bug), which schemathesis reports as an error.
  # shellcheck disable=SC2086 # SCHEMATHESIS_EXTRA is a list of options
  (cd "$work" && timeout "$run_timeout" schemathesis run "$work/openapi.json" \
    --url "${base}${server%/}" \
    --header "Authorization: Bearer $key" \
    --checks "$checks" \
    --max-examples "$max_examples" \
    --request-timeout 10 \
    --workers 1 \
    "${seed_args[@]}" \
    ${SCHEMATHESIS_EXTRA:-}) || status=$?
done

if [[ "$status" -ne 0 ]]; then
  echo "schemathesis.sh: failures (api dev log tail below)" >&2
  tail -n 30 "$work/stderr" >&2
fi
exit "$status"
