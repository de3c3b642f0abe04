/** Version of this SDK, kept equal to package.json's `version`. */
export const SDK_VERSION = "0.1.0";
