# The walls between pure policy and I/O, checked by the build rather than written in comments.
#
# hyperpack_link_closure(TARGET OUT): every target and library TARGET links, directly or through
# others (aliases resolved, $<LINK_ONLY:...> unwrapped), into the list OUT.
# hyperpack_check_pure(TARGET...): fails the configure if a pure target's closure holds a library
# that does I/O: threads, SQLite, or one of hyperpack's own driver or storage targets. Asio is
# header-only inside Boost::headers, so its includes are checked in the sources instead
# (cmake/check_pure_sources.cmake, run as a test).

set(HYPERPACK_IMPURE_LINKS
    Threads::Threads pthread SQLite::SQLite3 sqlite3 hyperpack_storage hyperpack_run
    hyperpack_cluster hyperpack_slurm hyperpack_report hyperpack_dashboard)

# hyperpack_direct_links(TARGET OUT): what TARGET links itself, public and private (its
# LINK_LIBRARIES, and INTERFACE_LINK_LIBRARIES for an interface library), $<LINK_ONLY:...>
# unwrapped and aliases resolved to the targets they name. Shared with cmake/module_graph.cmake.
function(hyperpack_direct_links target out)
  set(links "")
  get_target_property(type ${target} TYPE)
  if(NOT type STREQUAL "INTERFACE_LIBRARY")
    get_target_property(direct ${target} LINK_LIBRARIES)
    if(direct)
      list(APPEND links ${direct})
    endif()
  endif()
  get_target_property(interface ${target} INTERFACE_LINK_LIBRARIES)
  if(interface)
    list(APPEND links ${interface})
  endif()
  set(resolved "")
  foreach(item ${links})
    string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" item "${item}")
    if(TARGET ${item})
      get_target_property(aliased ${item} ALIASED_TARGET)
      if(aliased)
        set(item ${aliased})
      endif()
    endif()
    list(APPEND resolved ${item})
  endforeach()
  set(${out} ${resolved} PARENT_SCOPE)
endfunction()

function(hyperpack_link_closure target out)
  set(seen "")
  set(todo ${target})
  while(todo)
    list(POP_FRONT todo item)
    if(item IN_LIST seen OR item STREQUAL "")
      continue()
    endif()
    list(APPEND seen ${item})
    if(TARGET ${item})
      hyperpack_direct_links(${item} links)
      list(APPEND todo ${links})
    endif()
  endwhile()
  list(REMOVE_ITEM seen ${target})
  set(${out} ${seen} PARENT_SCOPE)
endfunction()

function(hyperpack_check_pure)
  foreach(target ${ARGN})
    hyperpack_link_closure(${target} closure)
    foreach(bad ${HYPERPACK_IMPURE_LINKS})
      if(bad IN_LIST closure)
        message(FATAL_ERROR "hyperpack: ${target} is pure (policy made from events, no I/O) but "
                            "links ${bad}; move the I/O into a driver (docs/ARCHITECTURE.md)")
      endif()
    endforeach()
  endforeach()
endfunction()
