# hyperpack_write_module_graph(FILE TARGET...): writes, for each of hyperpack's own targets, the
# module name and the modules it links directly (public or private), one module a line:
# "controller: common placement records study tuner". A module is a target's name less its
# `hyperpack_` prefix (the `hyperpack` program is `cli`). docs/ARCHITECTURE.md's drawing is
# checked against this file (tests/docs_test.cc), so the drawing cannot drift from the build.
# Needs cmake/walls.cmake (hyperpack_direct_links).
function(hyperpack_module_name target out)
  if(target STREQUAL "hyperpack")
    set(${out} cli PARENT_SCOPE)
  else()
    string(REGEX REPLACE "^hyperpack_" "" name "${target}")
    set(${out} ${name} PARENT_SCOPE)
  endif()
endfunction()

function(hyperpack_write_module_graph file)
  set(text "")
  foreach(target ${ARGN})
    if(NOT TARGET ${target})
      continue()
    endif()
    hyperpack_direct_links(${target} links)
    set(deps "")
    foreach(link ${links})
      if(link IN_LIST ARGN)
        hyperpack_module_name(${link} dep)
        list(APPEND deps ${dep})
      endif()
    endforeach()
    list(REMOVE_DUPLICATES deps)
    list(SORT deps)
    hyperpack_module_name(${target} name)
    list(JOIN deps " " joined)
    string(APPEND text "${name}: ${joined}\n")
  endforeach()
  file(GENERATE OUTPUT ${file} CONTENT "${text}")
endfunction()
