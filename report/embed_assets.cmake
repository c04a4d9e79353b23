# Writes a C++ source defining one function per asset that returns its bytes:
#   cmake -DOUT=page_assets.cc -DASSETS="Body=path|Script=part1,part2,...|..." -P embed_assets.cmake
# ('|', not ';', between them: a build tool's command line keeps it.) An asset of several paths
# (',' between them) is their bytes one after another, in that order. The bytes go in as an array
# of escapes (a raw string literal could be ended early by what it holds).
string(REPLACE "|" ";" ASSETS "${ASSETS}")
set(code "// Generated from report/page/ and Chart.js by report/embed_assets.cmake: do not edit.\n")
string(APPEND code "#include \"page_assets.h\"\n\nnamespace hyperpack::report::assets {\n")
foreach(asset IN LISTS ASSETS)
  string(REGEX MATCH "^([A-Za-z]+)=(.*)$" _ "${asset}")
  set(name "${CMAKE_MATCH_1}")
  string(REPLACE "," ";" paths "${CMAKE_MATCH_2}")
  set(hex "")
  foreach(path IN LISTS paths)
    file(READ "${path}" part HEX)
    string(APPEND hex "${part}")
  endforeach()
  string(LENGTH "${hex}" digits)
  math(EXPR size "${digits} / 2")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," bytes "${hex}")
  string(APPEND code "\nstd::string_view ${name}() {\n  static const char kBytes[] = {${bytes}0};\n"
                     "  return {kBytes, ${size}};\n}\n")
endforeach()
string(APPEND code "\n}  // namespace hyperpack::report::assets\n")
file(WRITE "${OUT}.tmp" "${code}")
file(RENAME "${OUT}.tmp" "${OUT}")
