/* Opens a model, feeds a prompt of token ids and samples a continuation.
 *   cc -std=c99 quickstart.c $(pkg-config --cflags --libs moestream) -o quickstart
 *   ./quickstart model.gguf */
#include <moestream.h>

#include <stdio.h>
#include <stdlib.h>

static int check(int status, const char *what) {
    if (status != MOESTREAM_OK)
        fprintf(stderr, "%s failed: %s (%s)\n", what, moestream_last_error(), moestream_status_string(status));
    return status == MOESTREAM_OK;
}

int main(int argc, char **argv) {
    moestream_params params;
    moestream_sampler_params sp;
    moestream_context *ctx = NULL;
    moestream_sampler *sampler = NULL;
    float *logits = NULL;
    int32_t prompt[] = {1, 2, 3, 4};
    int32_t token = 0;
    int ok = 0, i;

    if (argc != 2) {
        fprintf(stderr, "usage: %s MODEL.gguf\n", argv[0]);
        return 2;
    }
    moestream_params_init(&params);         /* sets struct_size and the defaults */
    params.model_path = argv[1];
    params.memory_budget = 8ull << 30;      /* bytes for the whole engine; 0 = automatic */
    if (!check(moestream_open(&params, &ctx), "moestream_open")) return 1;

    moestream_sampler_params_init(&sp);
    sp.seed = 42;
    if (!check(moestream_sampler_new(&sp, &sampler), "moestream_sampler_new")) goto done;
    logits = malloc(sizeof(float) * (size_t)moestream_n_vocab(ctx));
    if (!logits) goto done;

    /* The prompt in one call; logits of its last token come back. */
    if (!check(moestream_step(ctx, prompt, 4, logits), "moestream_step")) goto done;
    for (i = 0; i < 16; ++i) {
        if (!check(moestream_sample(sampler, logits, moestream_n_vocab(ctx), &token), "moestream_sample")) goto done;
        printf("%d ", (int)token);
        if (token == moestream_token_eos(ctx)) break;
        if (!check(moestream_step(ctx, &token, 1, logits), "moestream_step")) goto done;
    }
    printf("\n");
    ok = 1;
done:
    free(logits);
    moestream_sampler_free(sampler);        /* both accept NULL */
    moestream_close(ctx);
    return ok ? 0 : 1;
}
