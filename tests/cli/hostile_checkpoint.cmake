# Issue 18: a checkpoint sidecar whose values are out of range or of the wrong type must not
# resume. `kiln train` writes a one-step checkpoint; each case edits one value of its sidecar
# into bad.json (beside the same tensor files, whose hashes still match) and `kiln train --resume
# bad.json` must exit 1 naming the file, the key and the value, with no bare library message.
# The unedited checkpoint then resumes (exit 0).
#   cmake -DKILN=build/tools/kiln -DWORK=/tmp/w -P tests/cli/hostile_checkpoint.cmake
#   (ctest -R cli.hostile_checkpoint)
cmake_minimum_required(VERSION 3.25)

file(REMOVE_RECURSE "${WORK}")
set(train train --model mnist-cnn --data synthetic:1x28x28:10:64 --batch 32 --epochs 2 --quiet --threads 1
    --workers 0)
execute_process(COMMAND ${EMULATOR} "${KILN}" ${train} --max-steps 1 --logdir "${WORK}" RESULT_VARIABLE rc
                OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(good "${WORK}/ckpt-00000001.json")
if(NOT rc EQUAL 0 OR NOT EXISTS "${good}")
  message(FATAL_ERROR "the first run wrote no ${good} (exit ${rc}):\n${out}${err}")
endif()
file(READ "${good}" sidecar)

set(forbidden "terminate called|Aborted|Segmentation|stoull|stoll|stod|_M_range_check|bad_alloc|type_error|out_of_range|invalid_argument|unexpected error")
set(failed 0)
set(n 0)
# check(<regex> <string(JSON) arguments that edit the sidecar>...)
function(check regex)
  math(EXPR n "${n} + 1")
  set(n ${n} PARENT_SCOPE)
  string(JSON edited ${ARGN})
  file(WRITE "${WORK}/bad.json" "${edited}")
  execute_process(COMMAND ${EMULATOR} "${KILN}" ${train} --resume "${WORK}/bad.json" RESULT_VARIABLE rc
                  OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
  set(text "${out}${err}")
  list(JOIN ARGN " " shown)
  if(NOT rc EQUAL 1 OR NOT text MATCHES "bad.json.*${regex}" OR text MATCHES "${forbidden}")
    math(EXPR failed "${failed} + 1")
    set(failed ${failed} PARENT_SCOPE)
    message("FAIL: ${shown}\n  exit ${rc}, expected 1 and 'bad.json.*${regex}'\n--- output\n${text}---")
  else()
    string(REGEX MATCH "kiln: error: [^\n]*" line "${text}")
    message("ok: ${line}")
  endif()
endfunction()

check("\"step\" is -1, not an integer >= 0" SET "${sidecar}" step -1)
check("\"step\" is -1, outside" SET "${sidecar}" state step -1)
check("\"epoch\" is \"x\", not an integer" SET "${sidecar}" state epoch "\"x\"")
check("\"batch_in_epoch\" is -3, outside" SET "${sidecar}" state batch_in_epoch -3)
check("the state has no \"batch_in_epoch\"" REMOVE "${sidecar}" state batch_in_epoch)
check("\"optimizer.lr\" is 1e\\+?308, outside" SET "${sidecar}" state optimizer lr 1e308)
check("\"optimizer.lr\" is -0.5, outside" SET "${sidecar}" state optimizer lr -0.5)
check("\"optimizer.steps\" is -1, outside" SET "${sidecar}" state optimizer steps -1)
check("\"base_lr\" is \"fast\", not a number" SET "${sidecar}" state base_lr "\"fast\"")
check("\"epoch_sums.0.\" is \"nan\", not a finite number" SET "${sidecar}" state epoch_sums 0 "\"nan\"")
check("\"epoch_sums.0.\" is \"1e999\", not a finite number" SET "${sidecar}" state epoch_sums 0 "\"1e999\"")
check("\"epoch_sums.2.\" is \"-4\", not a finite number" SET "${sidecar}" state epoch_sums 2 "\"-4\"")
check("\"epoch_sums\" is \"x\", not .loss, correct, seen." SET "${sidecar}" state epoch_sums "\"x\"")
check("\"rng.seed\" is \"12abc\", not an unsigned 64-bit integer" SET "${sidecar}" state rng seed "\"12abc\"")
check("\"rng.offset\" is \"-1\", not an unsigned 64-bit integer" SET "${sidecar}" state rng offset "\"-1\"")
check("\"rng.seed\" is 5, not an integer as text" SET "${sidecar}" state rng seed 5)
check("\"seed\" is -7, outside" SET "${sidecar}" state seed -7)
check("\"weights.sha256\" is \"x\", not 64 hex digits" SET "${sidecar}" weights sha256 "\"x\"")
check("JSON nested deeper than 64 levels" SET "${sidecar}" state deep
      "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]")

execute_process(COMMAND ${EMULATOR} "${KILN}" ${train} --resume "${good}" RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  math(EXPR failed "${failed} + 1")
  message("FAIL: the unedited checkpoint does not resume (exit ${rc}):\n${out}${err}")
endif()
file(REMOVE_RECURSE "${WORK}")
if(failed GREATER 0)
  message(FATAL_ERROR "${failed} of ${n} edited sidecars (or the resume of the good one) failed")
endif()
message("all ${n} edited sidecars are refused naming file, key and value; the unedited one resumes")
