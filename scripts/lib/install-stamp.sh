# Sourced by scripts/serve: install into .venv only when what decides the install has changed.
#
#   install_if_changed     creates .venv if needed; runs pip only when the stamp differs
#
# The stamp (.venv/.agui-install-stamp: a new virtualenv installs again; delete it to force an install) is a
# hash of the files that decide what pip installs, the install arguments and the interpreter's version. The
# project itself is installed editable, so a change to its code needs no install. AGUI_SERVE_PIP replaces
# the pip command (tests record the calls with it).

INSTALL_INPUTS=(requirements.txt requirements-demo.txt setup.cfg pyproject.toml)
INSTALL_ARGS=(-r requirements-demo.txt -e '.[demo]')
INSTALL_STAMP=.venv/.agui-install-stamp

install_stamp() {
  {
    printf '%s\n' "${INSTALL_ARGS[@]}"
    .venv/bin/python -c 'import sys; print(sys.version)'
    cat "${INSTALL_INPUTS[@]}"
  } | sha256sum | cut -c1-32
}

install_if_changed() {
  [ -x .venv/bin/python ] || python3 -m venv .venv
  local pip want
  read -r -a pip <<< "${AGUI_SERVE_PIP:-.venv/bin/python -m pip}"
  want=$(install_stamp)
  if [ "$(cat "$INSTALL_STAMP" 2>/dev/null)" = "$want" ]; then
    return 0
  fi
  "${pip[@]}" install -q --disable-pip-version-check --upgrade pip
  "${pip[@]}" install -q --disable-pip-version-check "${INSTALL_ARGS[@]}"
  echo "$want" > "$INSTALL_STAMP"
}
