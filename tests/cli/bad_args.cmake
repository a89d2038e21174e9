# Issue 18: every bad argument of the `kiln` CLI gives a clear error and a non-zero exit. Each
# case runs kiln once and must exit 1 (a kiln::Error) or 2 (a bad command line), not 0 and not by
# a signal, print the expected message, and print no bare library message (stoull,
# vector::_M_range_check, std::bad_alloc, a JSON type_error) and no "unexpected error" (an
# exception that was not a kiln::Error). A FIFO stands where a file is expected in some cases:
# kiln must refuse it at once (a hang fails the case by its timeout).
#   cmake -DKILN=build/tools/kiln -DWORK=/tmp/w -DPROFILE=dist/reference/profiles/resnet50-cpu-b32.json
#         -P tests/cli/bad_args.cmake                               (ctest -R cli.bad_args)
cmake_minimum_required(VERSION 3.25)

file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
set(fifo "${WORK}/fifo.json")
execute_process(COMMAND mkfifo "${fifo}" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "mkfifo ${fifo} failed")
endif()

file(WRITE "${WORK}/r.json" "{\"runs\": [{\"model\": \"m\", \"batch\": 2, \"mode\": \"forward\", \"images_per_s\": 5}]}")
file(WRITE "${WORK}/bad_run.json" "{\"runs\": [{\"model\": \"m\", \"batch\": \"two\", \"mode\": \"forward\", \"images_per_s\": 5}]}")
# A name longer than any path may be (ENAMETOOLONG): std::filesystem's throwing calls failed on it.
string(REPEAT "a" 5000 long)
set(data "--model mnist-cnn --data synthetic:1x28x28:10:64 --quiet")
set(train "train ${data}")
set(bench "bench --model mnist-cnn --iters 1 --warmup 0")
set(scale "scale --profile ${PROFILE}")
# "expected regex :: arguments" (split at spaces; a leading env:NAME=VALUE sets the environment).
# No square brackets in a case: CMake would not split the list inside them ('.' matches them).
set(cases
    # Sizes: zero, negative, absurd, not a number.
    "--batch: '0' is not a whole number in .1, 1048576. :: ${train} --batch 0"
    "--batch: '-5' is not a whole number :: ${train} --batch -5"
    "--batch: '99999999999999999999' is not a whole number :: ${train} --batch 99999999999999999999"
    "--batch: 'x' is not a whole number :: ${train} --batch x"
    "--epochs: '0' is not a whole number :: ${train} --epochs 0"
    "--threads: '-1' is not a whole number in .0, 4096. :: ${train} --threads -1"
    "--threads: '100000' is not a whole number :: ${train} --threads 100000"
    "--workers: '-1' is not a whole number :: ${train} --workers -1"
    "--workers: '5000' is not a whole number in .0, 1024. :: ${train} --workers 5000"
    "--limit-train: '-3' is not a whole number :: ${train} --limit-train -3"
    "--max-steps: '-1' is not a whole number :: ${train} --max-steps -1"
    "--log-every: '0' is not a whole number :: ${train} --log-every 0"
    "--checkpoint-every: '-1' is not a whole number :: ${train} --checkpoint-every -1"
    "--keep: '-1' is not a whole number :: ${train} --keep -1"
    "--seed: '-1' is not a whole number :: ${train} --seed -1"
    # Reals: out of range, NaN, infinity.
    "--lr: '0' is not a finite number in \\(0, 10. :: ${train} --lr 0"
    "--lr: '-0.1' is not a finite number :: ${train} --lr -0.1"
    "--lr: 'nan' is not a finite number :: ${train} --lr nan"
    "--lr: 'inf' is not a finite number :: ${train} --lr inf"
    "--lr: '1e308' is not a finite number :: ${train} --lr 1e308"
    "--momentum: '5' is not a finite number in .0, 1\\) :: ${train} --momentum 5"
    "--momentum: '-0.5' is not a finite number :: ${train} --momentum -0.5"
    "--weight-decay: '-1' is not a finite number :: ${train} --weight-decay -1"
    "--weight-decay: 'nan' is not a finite number :: ${train} --weight-decay nan"
    "--warmup: '-1' is not a finite number :: ${train} --warmup -1"
    "--clip-norm: '-1' is not a finite number :: ${train} --clip-norm -1"
    "--val-fraction: '1' is not a finite number in .0, 1\\) :: ${train} --val-fraction 1"
    "--bucket-mb: '0' is not a finite number :: ${train} --bucket-mb 0"
    "--comm-timeout: '0' is not a finite number :: ${train} --comm-timeout 0"
    "--comm-warn: 'nan' is not a finite number :: ${train} --comm-warn nan"
    "--staleness: '-2' is not a whole number :: ${train} --staleness -2"
    "--ps: '-1' is not a whole number :: ${train} --ps -1"
    "--comm: bogus not in .auto,mpi,nccl. :: ${train} --comm bogus"
    "--allreduce: bogus not in .library,ring. :: ${train} --allreduce bogus"
    "invalid device 'cuda:99999999999' \\(expected cpu, cuda or cuda:N with N < 10000\\) :: ${train} --device cuda:99999999999"
    "invalid device 'cpu:3' :: ${bench} --batch 2 --device cpu:3"
    # Names: model, data, backend, optimizer, schedule, dtype, layout, task.
    "unknown model 'nope' \\(known: mnist-cnn :: train --model nope --data synthetic:1x28x28:10:64"
    "--data nope: neither a path nor an installed data set :: train --model mnist-cnn --data nope"
    "--data aaaa.*: neither a path nor an installed data set :: train --model mnist-cnn --data ${long}"
    "bad synthetic spec :: train --model mnist-cnn --data synthetic:1x28x28:10:99999999999999999999"
    "--backend: unknown backend 'quantum' \\(known: auto, .*native :: ${train} --backend quantum"
    "unknown optimizer 'nope' \\(known: sgd :: ${train} --optimizer nope"
    "unknown schedule 'bogus' :: ${train} --schedule bogus"
    "EPOCHS must be a whole number in .1, 1048576., got '99999999999999999999' :: ${train} --schedule step:99999999999999999999:0.1"
    "--dtype: 'float32', 'bfloat16' or 'float16', not 'int8' :: ${train} --dtype int8"
    "--layout: 'nhwc' or 'nchw', not 'x' :: ${train} --layout x"
    "--task: 'auto', 'classification', 'segmentation' or 'regression', not 'x' :: ${train} --task x"
    "--loss: 'mse' or 'mae', not 'huber' :: ${train} --loss huber"
    # Files: missing, a FIFO, unwritable folders.
    "load_checkpoint../nonexistent/x..: directory '/nonexistent' does not exist :: ${train} --resume /nonexistent/x"
    "fifo.json': cannot open the sidecar: .*not a regular file :: ${train} --resume ${fifo}"
    "--logdir /proc/kiln-no/x: cannot create the folder :: ${train} --max-steps 1 --logdir /proc/kiln-no/x"
    "no sidecar 'ckpt.json' in directory '.*' .a checkpoint is <prefix>.json beside :: eval --checkpoint ${WORK}/ckpt"
    "fifo.json': cannot open the sidecar: .*not a regular file :: eval --checkpoint ${fifo}"
    "--batch: '0' is not a whole number :: eval --checkpoint ${WORK}/ckpt --batch 0"
    # bench
    "--batch: '0' is not a whole number :: ${bench} --batch 0"
    "--batch: '-5' is not a whole number :: ${bench} --batch 16,-5"
    "--batch: '1000000000' is not a whole number :: ${bench} --batch 1000000000"
    "--batch: '16x' is not a whole number :: ${bench} --batch 16x"
    "--iters: '0' is not a whole number :: bench --model mnist-cnn --iters 0"
    "--warmup: '-1' is not a whole number :: bench --model mnist-cnn --warmup -1"
    "--threads: '99999' is not a whole number :: ${bench} --threads 99999"
    "unknown model 'nope' \\(known: :: bench --model nope"
    "--mode takes forward and/or train, got 'bogus' :: ${bench} --mode bogus"
    "--dtype: 'float32', 'bfloat16' or 'float16', not 'int8' :: ${bench} --dtype int8 --batch 2"
    "^kiln: error: --layout: 'auto', 'nhwc' or 'nchw', not 'foo' :: ${bench} --layout foo --batch 2,4"
    "--out /nonexistent/d/x.json: the folder /nonexistent/d does not exist :: ${bench} --batch 2 --out /nonexistent/d/x.json"
    "--out ${WORK}/x.txt: the format comes from the extension :: ${bench} --batch 2 --out ${WORK}/x.txt"
    "--out /proc: is a folder :: ${bench} --batch 2 --out /proc"
    "KILN_BACKEND: unknown backend 'quantum' \\(known: auto, .*native.*ref :: env:KILN_BACKEND=quantum ${bench} --batch 2"
    "KILN_BACKEND: unknown backend 'quantum' :: env:KILN_BACKEND=quantum info"
    "KILN_BACKEND_STRICT: 'yes' is not 0 or 1 :: env:KILN_BACKEND_STRICT=yes info"
    "KILN_NUM_THREADS='8x' is not a whole number in .1, 4096. :: env:KILN_NUM_THREADS=8x ${bench} --batch 2"
    "KILN_FUSE='yes' is not one of: 0, 1 :: env:KILN_FUSE=yes ${bench} --batch 2"
    "KILN_CPU_ALLOC='none' is not one of: direct, caching :: env:KILN_CPU_ALLOC=none ${bench} --batch 2"
    "KILN_CPU_CACHE_LIMIT_MB='lots' is not a whole number :: env:KILN_CPU_CACHE_LIMIT_MB=lots ${bench} --batch 2"
    "KILN_TRACE_DISPATCH='yes' is not one of: 0, 1 :: env:KILN_TRACE_DISPATCH=yes ${bench} --batch 2"
    "KILN_GEMM_BLOCKING='64' is not kc,nc :: env:KILN_GEMM_BLOCKING=64 ${bench} --batch 2"
    "KILN_OPTIM_MULTI_TENSOR='no' is not one of: 0, 1 :: env:KILN_OPTIM_MULTI_TENSOR=no ${train} --max-steps 1"
    # scale
    "--gpus: '0' is not a whole number in .1, 1048576. :: ${scale} --gpus 1,0"
    "--gpus: '2147483648' is not a whole number :: ${scale} --gpus 2147483648"
    "--gpus: '2000000000' is not a whole number :: ${scale} --gpus 2000000000"
    "--gpus-per-node: '0' is not a whole number :: ${scale} --gpus-per-node 0"
    "--gpus-per-node: '2147483647' is not a whole number :: ${scale} --gpus-per-node 2147483647"
    "--ps-servers: '-1' is not a whole number :: ${scale} --ps-servers -1"
    "--jitter: 'nan' is not a finite number :: ${scale} --jitter nan"
    "--bucket-mb: '0' is not a finite number :: ${scale} --bucket-mb 0"
    "--intra-bw: '-1' is not a finite number :: ${scale} --intra-bw -1"
    "--batch: '-1' is not a whole number :: ${scale} --batch -1"
    "--iters: '0' is not a whole number :: scale --iters 0"
    "unknown network 'ib-xdr' :: ${scale} --inter ib-xdr"
    "cannot open '/nonexistent/p.json' :: scale --profile /nonexistent/p.json"
    "fifo.json.*not a regular file :: scale --profile ${fifo}"
    "--json /nonexistent/x.json: the folder /nonexistent does not exist :: ${scale} --json /nonexistent/x.json"
    # export, plot, compare, data
    "--batch: '0' is not a whole number :: export --onnx ${WORK}/m.onnx --model mnist-cnn --batch 0"
    "--onnx /nonexistent/m.onnx: the folder /nonexistent does not exist :: export --onnx /nonexistent/m.onnx --model mnist-cnn"
    "unknown model 'nope' :: export --onnx ${WORK}/m.onnx --model nope"
    "nonexistent.json: cannot open :: plot /nonexistent.json"
    "fifo.json: cannot open .*not a regular file :: plot ${fifo}"
    "fifo.json: cannot open .*not a regular file :: compare ${fifo} ${fifo}"
    "bad_run.json: run 0: 'batch' is \"two\", not a number :: compare ${WORK}/bad_run.json ${WORK}/r.json"
    "-o /nonexistent/chart.png: the folder /nonexistent does not exist :: plot ${WORK}/r.json -o /nonexistent/chart"
    "KILN_GNUPLOT '/etc/passwd' is not an executable file :: env:KILN_GNUPLOT=/etc/passwd plot ${WORK}/r.json -o ${WORK}/c"
    "unknown data set 'nope' \\(known: mnist :: data fetch nope"
    "--from '/aaaa.*' is one file but data set 'fashion-mnist' has 4 files :: data fetch fashion-mnist --from /${long} --dir ${WORK}/fm"
    "--logdir /tmp/aaaa.*: cannot create the folder: File name too long :: ${train} --max-steps 1 --logdir /tmp/${long}"
    "KILN_CATALOGUE '/nonexistent/c.json': cannot open :: env:KILN_CATALOGUE=/nonexistent/c.json data list"
    "KILN_CATALOGUE '.*fifo.json': cannot open: .*not a regular file :: env:KILN_CATALOGUE=${fifo} data list")

# What must never reach the user: a crash, or a library's own message instead of kiln's.
set(forbidden "terminate called|Aborted|Segmentation|core dumped|stoull|stoll|stoi|stod|_M_range_check|bad_alloc|type_error|out_of_range|invalid_argument|unexpected error")

set(failed 0)
set(n 0)
foreach(case IN LISTS cases)
  math(EXPR n "${n} + 1")
  string(FIND "${case}" " :: " sep)
  string(SUBSTRING "${case}" 0 ${sep} regex)
  math(EXPR start "${sep} + 4")
  string(SUBSTRING "${case}" ${start} -1 args)
  separate_arguments(args UNIX_COMMAND "${args}")
  set(env)
  list(GET args 0 first)
  if(first MATCHES "^env:(.*)$")
    set(env ${CMAKE_COMMAND} -E env "${CMAKE_MATCH_1}")
    list(REMOVE_AT args 0)
  endif()
  execute_process(COMMAND ${env} ${EMULATOR} "${KILN}" ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err TIMEOUT 120)
  set(text "${out}${err}")
  list(JOIN args " " shown)
  set(why "")
  if(NOT rc MATCHES "^[12]$")
    set(why "exit ${rc}, expected 1 or 2")
  elseif(NOT text MATCHES "${regex}")
    set(why "output does not match '${regex}'")
  elseif(text MATCHES "${forbidden}")
    set(why "output holds a crash or a bare library message (${CMAKE_MATCH_0})")
  endif()
  if(why)
    math(EXPR failed "${failed} + 1")
    message("FAIL: kiln ${shown}\n  ${why}\n--- output\n${text}---")
  else()
    string(STRIP "${err}" line)
    string(REGEX REPLACE "\n.*" "" line "${line}")
    message("ok (exit ${rc}): kiln ${shown}\n    ${line}")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK}")
if(failed GREATER 0)
  message(FATAL_ERROR "${failed} of ${n} bad-argument cases failed")
endif()
message("all ${n} bad-argument cases give a clear error and a non-zero exit")
