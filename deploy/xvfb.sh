# deploy/xvfb.sh — sourced by tests/run.sh, deploy/demo.sh and deploy/screenshots.sh: start_xvfb
# starts an Xvfb of this run's own and exports DISPLAY once it accepts clients; stop_xvfb kills
# it. Xvfb picks the display number itself (-displayfd: the first one free, claimed through its
# lock file) and writes it once it listens, so two runs started at the same moment never end up
# on one server — guessing a free number from the lock files and sockets could hand a run the
# socket of another run's server, which then disappears under it. Xvfb comes from the Debian
# package xvfb (deploy/deps.sh); Mesa's llvmpipe then gives an OpenGL 4.5 core context.

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
  local tmp_dir n i
  tmp_dir=$(mktemp -d)
  # XVFB_LOG (optional): where the server's own messages go, for when a client cannot connect.
  # -noreset: by default the server resets when its last client leaves, and a client connecting
  # during the reset is refused ("cannot open X display"). The GL tests are short processes run
  # two at a time, so one would now and then start as the other ended: 9 of 1,800 runs of a GL
  # test, two loops side by side, failed so without it, none of 1,800 with it.
  Xvfb -displayfd 3 -screen 0 1280x1024x24 -nolisten tcp -noreset 3>"$tmp_dir/display" >>"${XVFB_LOG:-/dev/null}" 2>&1 &
  xvfb_pid=$!
  for i in $(seq 1 200); do # up to 20 s
    n=
    # the number and a newline, written once it listens
    [ "$(wc -l <"$tmp_dir/display" 2>/dev/null || echo 0)" -ge 1 ] && n=$(tr -dc '0-9' <"$tmp_dir/display")
    if [ -n "$n" ] && [ -S "/tmp/.X11-unix/X$n" ]; then
      rm -rf "$tmp_dir"
      export DISPLAY=":$n"
      return 0
    fi
    kill -0 "$xvfb_pid" 2>/dev/null || break
    sleep 0.1
  done
  stop_xvfb
  rm -rf "$tmp_dir"
  echo "could not start Xvfb (it exited or did not say which display it took)" >&2
  return 1
}
