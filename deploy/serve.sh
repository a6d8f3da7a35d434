# deploy/serve.sh — sourced by deploy/demo.sh and deploy/screenshots.sh: start_demo_server BIN
# starts `deformd --demo` from BIN (the build's bin/ folder) on ports the system chooses,
# waits until the demo session answers, and sets `sp` (stream port), `rp` (JSON-RPC port), `hp`
# (HTTP port: the browser viewer) and the array `ctl` (deformctl aimed at them); stop_demo_server
# stops it.

demo_pid=
demo_out=
start_demo_server() {
  local bin=$1
  demo_out=$(mktemp)
  "$bin/deformd" --demo --data none --stream-port 0 --rpc-port 0 --http-port 0 --log-level warn >"$demo_out" &
  demo_pid=$!
  for _ in $(seq 100); do grep -q rpc_port "$demo_out" && break; sleep 0.1; done
  read -r sp rp hp < <(sed -n 's/stream_port=\([0-9]*\) rpc_port=\([0-9]*\) http_port=\([0-9]*\)/\1 \2 \3/p' "$demo_out")
  ctl=("$bin/deformctl" --rpc "127.0.0.1:$rp" --stream "127.0.0.1:$sp")
  for _ in $(seq 100); do "${ctl[@]}" mesh.info demo >/dev/null 2>&1 && break; sleep 0.1; done
}

stop_demo_server() {
  if [ -n "$demo_pid" ]; then
    kill "$demo_pid" 2>/dev/null || true
    wait "$demo_pid" 2>/dev/null || true
    demo_pid=
  fi
  rm -f "$demo_out"
}
