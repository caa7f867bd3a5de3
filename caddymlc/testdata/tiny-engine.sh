#!/bin/sh
# An "engine command" for the tests: runs the built-in tiny engine (the test
# binary, as mlc-engine) whatever model the router names, so that the router
# can be given a model it cannot read a tokenizer from.
shift # the model
exec "$CADDY_MLC_TEST_BIN" mlc-engine tiny "$@"
