"use client";

/** Shows an error from a tRPC call as a sentence, never a stack trace. */
export function ErrorMessage({ error }: { error: { message: string } | null | undefined }) {
  if (!error) return null;
  return (
    <p role="alert" className="error">
      {error.message}
    </p>
  );
}
