/** Any value that survives a round trip through JSON. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
