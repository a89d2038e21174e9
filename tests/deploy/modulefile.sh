#!/usr/bin/env bash
# Checks the Lmod modulefile template (deploy/modulefiles/kiln/0.1.0.lua): it compiles (luac -p)
# and, run under stand-ins for Lmod's functions, sets KILN_ROOT and prepends PATH,
# LD_LIBRARY_PATH, CMAKE_PREFIX_PATH and PKG_CONFIG_PATH under the prefix, with help and whatis
# text. Exit 77 (skipped, "SKIPPED: <reason>") without Lua 5.x; with CI=true that fails instead
# (tools/install-deps.sh --test installs lua5.4; tests/support/skip.sh).
#   tests/deploy/modulefile.sh        (ctest -R deploy.modulefile)
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
mf="$root/deploy/modulefiles/kiln/0.1.0.lua"
lua=""
for c in lua5.4 lua5.3 lua; do command -v "$c" >/dev/null 2>&1 && { lua="$c"; break; }; done
[[ -n $lua ]] ||
  exec bash "$root/tests/support/skip.sh" lua5.4 "no Lua interpreter (apt-get install lua5.4, or tools/install-deps.sh --test)"
"$lua" - "$mf" <<'LUA'
local file = arg[1]
local env, prepended, whatis_lines, help_text = {}, {}, {}, ""
-- Stand-ins for the Lmod functions a modulefile may call.
local sandbox = {
  pathJoin = function(...) return table.concat({...}, "/") end,
  isDir = function(_) return false end,
  whatis = function(s) whatis_lines[#whatis_lines + 1] = s end,
  help = function(s) help_text = s end,
  setenv = function(k, v) env[k] = v end,
  prepend_path = function(k, v) prepended[k] = v end,
  conflict = function() end, depends_on = function() end,
}
setmetatable(sandbox, {__index = _G})
local chunk, err = loadfile(file, "t", sandbox)
if not chunk then print("FAIL: " .. err); os.exit(1) end
chunk()
local root = env.KILN_ROOT
local function check(ok, what) if not ok then print("FAIL: " .. what); os.exit(1) end end
check(root ~= nil, "KILN_ROOT not set")
check(prepended.PATH == root .. "/bin", "PATH")
check(prepended.LD_LIBRARY_PATH == root .. "/lib", "LD_LIBRARY_PATH")
check(prepended.CMAKE_PREFIX_PATH == root, "CMAKE_PREFIX_PATH")
check(prepended.PKG_CONFIG_PATH == root .. "/lib/pkgconfig", "PKG_CONFIG_PATH")
check(#whatis_lines >= 2 and help_text:find("kiln info", 1, true), "whatis/help text")
print("modulefile: KILN_ROOT=" .. root .. ", PATH, LD_LIBRARY_PATH, CMAKE_PREFIX_PATH, PKG_CONFIG_PATH; "
      .. #whatis_lines .. " whatis lines, help " .. #help_text .. " chars")
LUA
