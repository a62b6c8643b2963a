# Shared by tests/cli/serve_*.sh (sourced, not a test itself): a scratch directory, a stand-in web app, a demo run,
# and servers started in the background (killed on exit).
# The sourcing script sets bin and repo first.
scratch=$(mktemp -d "${TMPDIR:-/tmp}/tt-cli-serve.XXXXXX")
servers=()
cleanup() {
  for pid in "${servers[@]}"; do kill -KILL "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; done
  rm -rf "$scratch"
}
trap cleanup EXIT

mkdir -p "$scratch/web/assets"
echo '<html>test app</html>' >"$scratch/web/index.html"

# make_run DIR: a short greedy run of the bundled model.
make_run() {
  "$bin" run -m "$repo/models/stories260K.gguf" -p "Once upon a time" -n 4 --temp 0 -t 2 -o "$1" >/dev/null 2>&1 ||
    { echo "FAIL: demo run"; exit 1; }
}

# start_serve LOG ARGS...: starts `serve ARGS --web-dir WEB` and waits for its URL; sets server (pid), url, port.
start_serve() {
  local log=$1
  shift
  "$bin" serve "$@" --web-dir "$scratch/web" >"$log" 2>&1 &
  server=$!
  servers+=("$server")
  for _ in $(seq 100); do grep -q "serving http" "$log" 2>/dev/null && break; sleep 0.1; done
  url=$(sed -n 's/^serving \(http[^ ]*\)$/\1/p' "$log")
  [ -n "$url" ] || { echo "FAIL: no URL printed: $(cat "$log")"; exit 1; }
  port=${url##*:}
  port=${port%/}
}
