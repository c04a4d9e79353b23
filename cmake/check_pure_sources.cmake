# cmake -DDIRS="dir-or-file;..." -P check_pure_sources.cmake: fails (and names file and line) where a
# pure folder's sources include or call what does I/O or reads time or entropy: Asio, SQLite,
# threads, processes, files, the clock, random_device, the environment.
set(patterns
    "#include <boost/asio" "#include <sqlite3.h>" "#include <thread>" "#include <mutex>"
    "#include <future>" "#include <sys/" "#include <unistd.h>" "#include <fstream>"
    "steady_clock::now" "system_clock::now" "random_device" "getenv" "popen" "fork(")
set(found 0)
foreach(dir ${DIRS})
  if(IS_DIRECTORY "${dir}")
    file(GLOB_RECURSE files "${dir}/*.h" "${dir}/*.cc")
  else()
    set(files "${dir}")  # a single file of a folder that is not pure as a whole
  endif()
  foreach(file ${files})
    file(READ "${file}" content)
    foreach(pattern ${patterns})
      string(FIND "${content}" "${pattern}" at)
      if(at GREATER -1)  # the first one: its line is the newlines before it, plus one
        string(SUBSTRING "${content}" 0 ${at} before)
        string(REGEX MATCHALL "\n" newlines "${before}")
        list(LENGTH newlines line)
        math(EXPR line "${line} + 1")
        message("${file}:${line}: '${pattern}' in a pure folder")
        math(EXPR found "${found} + 1")
      endif()
    endforeach()
  endforeach()
endforeach()
if(found GREATER 0)
  message(FATAL_ERROR "${found} thing(s) a pure folder must not do; move them into a driver")
endif()
message("the pure folders do no I/O: ${DIRS}")
