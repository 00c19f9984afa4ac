"use client";

import { CopyField } from "@/components/ui/copy-button";

/**
 * Where an agent session's work goes (README "Where your agents' work goes"): each finished task
 * is merged into the run's integration branch in the workspace's repository, and the person's own
 * branch is never touched. The panel names the branch and gives the commands to look at it, take
 * it and throw it away, each ready to copy. Shown only when the workspace is a git repository.
 */
export function IntegrationBranch({
  integration,
}: {
  integration: { branch: string; exists: boolean; repositoryRoot: string };
}) {
  const { branch, exists, repositoryRoot } = integration;
  const commands = [
    { label: "Look at it", command: `git log --oneline HEAD..${branch}`, what: "the command to list its commits" },
    { label: "", command: `git diff HEAD...${branch}`, what: "the command to show its changes" },
    { label: "Merge it into your branch", command: `git merge ${branch}`, what: "the merge command" },
    { label: "Discard it", command: `git branch -D ${branch}`, what: "the command to delete the branch" },
  ];
  return (
    <div className="stack-sm integration-branch" role="region" aria-label="Where the agents' work goes">
      <strong>Where the agents’ work goes</strong>
      <p className="muted" data-testid="integration-branch">
        Each finished task is merged into the branch <code className="mono">{branch}</code> of{" "}
        <code className="mono">{repositoryRoot}</code>
        {exists ? "" : " (made when the first task starts)"}; your own branch is left alone. Run these in that directory
        once the run has finished:
      </p>
      <dl className="integration-commands">
        {commands.map(({ label, command, what }) => (
          <div key={command}>
            {label && <dt>{label}</dt>}
            <dd>
              <CopyField value={command} what={what} />
            </dd>
          </div>
        ))}
      </dl>
    </div>
  );
}
