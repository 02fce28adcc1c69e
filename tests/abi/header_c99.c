/* The public header as a strict C99 client sees it (-std=c99 -pedantic -Werror),
 * and the runtime version agreeing with the header's. */
#include <moestream.h>

#include <stdio.h>
#include <string.h>

static int failures = 0;

#define CHECK(cond)                                                         \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            ++failures;                                                     \
        }                                                                   \
    } while (0)

int main(void) {
    moestream_sampler_params sp;
    moestream_sampler *sampler = NULL;
    float logits[4] = {0.5f, 2.0f, -1.0f, 1.5f};
    int32_t token = -1;
    int status;

    CHECK(moestream_version_number() == MOESTREAM_VERSION_NUMBER);
    CHECK(strcmp(moestream_version_string(), MOESTREAM_VERSION_STRING) == 0);
    CHECK(strcmp(MOESTREAM_VERSION_STRING, MOESTREAM_PROJECT_VERSION) == 0);
    CHECK(MOESTREAM_VERSION_MAJOR == MOESTREAM_EXPECTED_ABI_MAJOR);
    CHECK(strcmp(moestream_status_string(MOESTREAM_OK), "ok") == 0);
    CHECK(strcmp(moestream_status_string(12345), "unknown status") == 0);
    CHECK(moestream_last_error() != NULL);
    CHECK(moestream_truncate(NULL, 0) == MOESTREAM_ERR_INVALID_ARGUMENT);

    moestream_sampler_params_init(&sp);
    CHECK(sp.struct_size == sizeof sp);
    sp.temperature = 0.0f;
    status = moestream_sampler_new(&sp, &sampler);
    CHECK(status == MOESTREAM_OK && sampler != NULL);
    status = moestream_sample(sampler, logits, 4, &token);
    CHECK(status == MOESTREAM_OK && token == 1);
    status = moestream_sample(sampler, logits, 0, &token);
    CHECK(status == MOESTREAM_ERR_INVALID_ARGUMENT && moestream_last_error()[0] != '\0');
    /* A repeat penalty of 4 on the token just drawn: 2 / 4 = 0.5 < 1.5. */
    moestream_sampler_free(sampler);
    sp.repeat_penalty = 4.0f;
    status = moestream_sampler_new(&sp, &sampler);
    CHECK(status == MOESTREAM_OK);
    CHECK(moestream_sampler_accept(sampler, &token, 1) == MOESTREAM_OK);
    CHECK(moestream_sample(sampler, logits, 4, &token) == MOESTREAM_OK && token == 3);
    CHECK(moestream_sampler_reset(sampler) == MOESTREAM_OK);
    CHECK(moestream_sampler_accept(sampler, NULL, 0) == MOESTREAM_OK);
    CHECK(moestream_sampler_accept(sampler, NULL, -1) == MOESTREAM_ERR_INVALID_ARGUMENT);
    moestream_sampler_free(sampler);
    moestream_sampler_free(NULL);

    {
        moestream_params params;
        moestream_context *ctx = NULL;
        moestream_params_init(&params);
        CHECK(params.struct_size == sizeof params);
        params.model_path = "/nonexistent/abi-check.gguf";
        status = moestream_open(&params, &ctx);
        CHECK(status == MOESTREAM_ERR_IO && ctx == NULL);
        CHECK(strstr(moestream_last_error(), "/nonexistent/abi-check.gguf") != NULL);
        params.struct_size = 1;
        CHECK(moestream_open(&params, &ctx) == MOESTREAM_ERR_INVALID_ARGUMENT);
        CHECK(moestream_n_vocab(NULL) == -1);
        CHECK(moestream_io_mode_reason(NULL) != NULL && moestream_io_mode_reason(NULL)[0] == '\0');
        moestream_close(NULL);
    }

    if (failures) return 1;
    printf("moestream %s: C99 header and runtime agree\n", moestream_version_string());
    return 0;
}
