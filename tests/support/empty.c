/* Keeps the support library non-empty before any helper exists. */
typedef int cnnb_test_support_empty;
