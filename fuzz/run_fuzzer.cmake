# Runs one fuzzer as a ctest test: cmake -DFUZZER=... -DSEEDS=... -DWORK=... -DSECONDS=... -P this.
# The seeds are copied into WORK first so the committed corpus is never written to. libFuzzer's
# output goes to WORK/fuzzer.log (its progress lines run to thousands); the test prints the run's
# final statistics, or on failure the end of the log, where the sanitizer's report is. A crashing
# input is saved in WORK/artifacts as crash-* (or leak-*, timeout-*, oom-*).
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}/artifacts")
file(COPY "${SEEDS}/" DESTINATION "${WORK}/corpus")
set(log "${WORK}/fuzzer.log")
execute_process(
  COMMAND "${FUZZER}" "-max_total_time=${SECONDS}" -rss_limit_mb=2048 -max_len=65536
          -timeout=30 -print_final_stats=1 "-artifact_prefix=${WORK}/artifacts/"
          "${WORK}/corpus"
  OUTPUT_FILE "${log}"
  ERROR_FILE "${log}"
  RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  file(READ "${log}" text)
  string(LENGTH "${text}" length)
  if(length GREATER 16000)
    math(EXPR from "${length} - 16000")
    string(SUBSTRING "${text}" ${from} -1 text)
  endif()
  message(FATAL_ERROR "${text}\n${FUZZER} failed (${status}); the input is in ${WORK}/artifacts")
endif()
file(STRINGS "${log}" stats REGEX "^stat::(number_of_executed_units|average_exec_per_sec|new_units_added|peak_rss_mb)")
string(REPLACE ";" "\n" stats "${stats}")
message("${stats}")
