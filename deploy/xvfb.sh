# deploy/xvfb.sh — sourced by tests/run.sh and deploy/demo.sh: start_xvfb starts Xvfb on the
# first free display number from 99 and exports DISPLAY once its socket is there; stop_xvfb
# kills it. A number is free when neither its lock file nor its socket exists; if another
# server wins the race for it, Xvfb exits and the next number is tried. Xvfb comes from the
# Debian package xvfb (deploy/deps.sh); Mesa's llvmpipe then gives an OpenGL 4.5 core context.

xvfb_pid=
stop_xvfb() {
  if [ -n "$xvfb_pid" ]; then
    kill "$xvfb_pid" 2>/dev/null || true
    wait "$xvfb_pid" 2>/dev/null || true
    xvfb_pid=
  fi
}

# Returns 0 with DISPLAY exported, 1 with a reason on stderr.
start_xvfb() {
  if ! command -v Xvfb >/dev/null 2>&1; then
    echo "Xvfb is not installed (deploy/deps.sh installs the xvfb package)" >&2
    return 1
  fi
  local n i
  for n in $(seq 99 160); do
    [ -e "/tmp/.X$n-lock" ] || [ -e "/tmp/.X11-unix/X$n" ] && continue
    Xvfb ":$n" -screen 0 1280x1024x24 -nolisten tcp >/dev/null 2>&1 &
    xvfb_pid=$!
    for i in $(seq 1 100); do # up to 10 s
      if [ -S "/tmp/.X11-unix/X$n" ]; then
        export DISPLAY=":$n"
        return 0
      fi
      kill -0 "$xvfb_pid" 2>/dev/null || break
      sleep 0.1
    done
    stop_xvfb
  done
  echo "could not start Xvfb on displays :99-:160" >&2
  return 1
}
