# Thin front end over Bazel. `make demo` and `make test` install what is missing first.
.PHONY: deps build demo test test-asan gpu clean

deps:
	@bash tools/install-deps.sh

build: deps
	bazel build //...

demo: deps
	@bash tools/demo.sh

test: deps
	@bash tools/run-tests.sh

test-asan: deps
	@bash tools/run-tests.sh --config=asan

gpu: deps
	@bash tools/gpu/build.sh

clean:
	bazel clean
