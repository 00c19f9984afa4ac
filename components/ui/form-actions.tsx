/**
 * The row that ends every edit form: the submit button (saying "Saving…" while the save is under
 * way) and Cancel, which closes the form without saving. One component so every form behaves and
 * reads the same.
 */
export function FormActions({
  label,
  pending,
  disabled = false,
  onCancel,
  small = false,
}: {
  /** What the submit button does, e.g. "Save changes". */
  label: string;
  /** A save is under way: the button says so and cannot be pressed twice. */
  pending: boolean;
  /** The form cannot be saved as it stands (e.g. nothing chosen). */
  disabled?: boolean;
  onCancel(): void;
  /** The compact size used inside table rows. */
  small?: boolean;
}) {
  const size = small ? " small" : "";
  return (
    <div className="row form-actions">
      <button type="submit" className={`primary${size}`} disabled={pending || disabled}>
        {pending ? "Saving…" : label}
      </button>
      <button type="button" className={small ? "small" : undefined} onClick={onCancel}>
        Cancel
      </button>
    </div>
  );
}
