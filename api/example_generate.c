/* example_generate.c: a complete program that uses only include/loom.h.
 *
 *   example_generate MODEL.gguf ID,ID,...   prints 16 greedy token ids after the prompt ids
 *
 * It shows the life cycle of the API: load a model, create a session, generate with a sampler,
 * read errors, destroy in reverse order. Built as //api:example_generate (and run by
 * tests/executor/cli_test.c, so it keeps compiling and working).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom.h"

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s MODEL.gguf ID,ID,...\n", argv[0]);
        return 2;
    }
    int32_t prompt[256], n_prompt = 0;
    for (char *p = argv[2], *end; *p && n_prompt < 256; p = end + (*end == ',')) {
        prompt[n_prompt++] = (int32_t)strtol(p, &end, 10);
        if (end == p || (*end && *end != ',')) {
            fprintf(stderr, "bad token list '%s'\n", argv[2]);
            return 2;
        }
    }

    loom_error err = {0};
    loom_model *model = NULL;
    loom_session *session = NULL;
    loom_sampler *sampler = NULL;
    loom_model_options mo;
    loom_model_options_init(&mo);
    mo.passes = "-O2";          /* fused kernels */
    mo.last_logits_only = true; /* generation needs only the last row */
    loom_sampler_options so;
    loom_sampler_options_init(&so); /* greedy */
    int32_t out[16], n_out = 0;
    int rc = 1;
    if (loom_model_load(argv[1], &mo, &model, &err) ||
        loom_session_create(model, NULL, &session, &err) ||
        loom_sampler_create(&so, &sampler, &err) ||
        loom_generate(session, prompt, n_prompt, 16, sampler, NULL, NULL, out, &n_out, &err)) {
        fprintf(stderr, "error (%s): %s\n", loom_status_name(err.status), err.msg);
    } else {
        for (int32_t i = 0; i < n_out; i++) printf("%s%d", i ? " " : "", out[i]);
        printf("\n");
        rc = 0;
    }
    loom_sampler_destroy(sampler);
    loom_session_destroy(session);
    loom_model_destroy(model);
    return rc;
}
