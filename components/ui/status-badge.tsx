export function StatusBadge({ status }: { status: string }) {
  return (
    <span className={`badge badge-${status}`} data-status={status}>
      {status.replaceAll("_", " ")}
    </span>
  );
}
