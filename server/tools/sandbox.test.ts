import { spawnSync } from "node:child_process";
import fs from "node:fs/promises";
import net from "node:net";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { gitStatusTool } from "./git-status";
import { describeSandbox, SANDBOX_LIMITS, sandboxAvailable, sandboxed, sandboxStatus } from "./sandbox";
import { runShell, shellTool } from "./shell";
import { createTempWorkspace, createToolContext, rejectionOf, removeTempWorkspace, runTool } from "./tool-test-support";

/**
 * The sandbox holds whatever the parser lets through: these commands are run confined exactly as
 * an ungated read-only step is, but they are ones a wrong parser might let through — each tries
 * to write, reach the network, read the server's secrets or the host's files, or outlive its limit.
 */

let workspace: string;
let listener: net.Server;
let port: number;
const connections: string[] = [];

beforeAll(async () => {
  workspace = await createTempWorkspace({ "README.md": "# readme\n" });
  listener = net.createServer((socket) => {
    connections.push("connected");
    socket.end();
  });
  await new Promise<void>((resolve) => listener.listen(0, "127.0.0.1", resolve));
  port = (listener.address() as net.AddressInfo).port;
  process.env.STEPWISE_TEST_SERVER_SECRET = "sk-server-secret-value";
});

afterAll(async () => {
  delete process.env.STEPWISE_TEST_SERVER_SECRET;
  listener.close();
  await removeTempWorkspace(workspace);
});

const confined = (command: string) => runShell(command, workspace, createToolContext(workspace), {}, { workspace });

it("is available where the tests run in CI (bubblewrap is installed by .ci/run)", () => {
  if (process.env.CI) expect(sandboxAvailable()).toBe(true);
});

it("its self-test proved every check from inside, or says why not", () => {
  const status = sandboxStatus();
  if (status.holds) {
    for (const name of ["uid", "capabilities", "write", "remount", "mount", "raise-limit", "chroot", "network"]) {
      expect(
        status.checks.find((check) => check.name === name),
        name,
      ).toMatchObject({ held: true });
    }
  } else {
    expect(status.reason).toBeTruthy();
  }
});

describe.runIf(sandboxAvailable())("the read-only sandbox", () => {
  it("lets a read-only command read the workspace", async () => {
    const result = await runTool(shellTool, { command: "cat README.md && ls" }, createToolContext(workspace));
    expect(result.stdout).toContain("# readme");
  });

  it("refuses every write to the workspace, even by a command the parser would have gated", async () => {
    for (const command of [
      "touch new.txt",
      "echo x > README.md",
      "rm README.md",
      "mkdir d",
      "sort -o README.md README.md",
    ]) {
      const result = await confined(command);
      expect(result.exitCode, command).not.toBe(0);
    }
    expect(await fs.readFile(path.join(workspace, "README.md"), "utf8")).toBe("# readme\n");
    expect((await fs.readdir(workspace)).sort()).toEqual(["README.md"]);
  });

  it("has no network: a listening local port cannot be reached", async () => {
    const result = await confined(`echo hi > /dev/tcp/127.0.0.1/${port}`);
    expect(result.exitCode).not.toBe(0);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(connections).toEqual([]);
  });

  it("sees none of the server's environment, processes or the host's home", async () => {
    const result = await confined(
      "env; cat /proc/1/environ 2>&1; cat /proc/$PPID/environ 2>&1; ls /proc; ls /root 2>&1; ls $HOME 2>&1; true",
    );
    expect(result.stdout).not.toContain("sk-server-secret-value");
    expect(result.stdout).not.toContain("DATABASE_URL");
    // Its own PID namespace: only the sandbox's few processes are listed.
    const pids = result.stdout.split("\n").filter((line) => /^\d+$/.test(line));
    expect(pids.length).toBeLessThan(10);
    expect(result.stdout).toMatch(/ls: cannot access '\/root'/);
  });

  it("a private /tmp: nothing written there reaches the host", async () => {
    const marker = `stepwise-sandbox-${process.pid}`;
    await confined(`echo x > /tmp/${marker}`);
    await expect(fs.stat(path.join("/tmp", marker))).rejects.toThrow();
  });

  it("runs without root and without capabilities, even though Stepwise runs as root", async () => {
    const result = await confined("id -u; id -g; grep -E '^Cap(Eff|Prm|Bnd)' /proc/self/status");
    const [uid, gid] = result.stdout.split("\n");
    expect(uid).toBe("65534");
    expect(gid).toBe("65534");
    expect(result.stdout).toMatch(/CapEff:\s+0000000000000000/);
    expect(result.stdout).toMatch(/CapPrm:\s+0000000000000000/);
    expect(result.stdout).toMatch(/CapBnd:\s+0000000000000000/);
  });

  it("cannot remount the workspace read-write, by util-linux mount or by mount(2) itself", async () => {
    const result = await confined(
      [
        `mount -o remount,bind,rw ${workspace} 2>&1; echo "mount=$?"`,
        `case $(uname -m) in x86_64) nr=165 ;; aarch64) nr=40 ;; esac`,
        // MS_REMOUNT|MS_BIND with the mount's own nosuid,nodev,relatime kept: only "ro" dropped.
        `perl -e 'my ($n, $s, $d) = ($ARGV[0], "none", $ARGV[1]); print "syscall=", syscall($n, $s, $d, 0, 2101286, 0), "\n"' "$nr" ${workspace}`,
        "touch written 2>&1; echo touch=$?",
      ].join("\n"),
    );
    expect(result.stdout).toMatch(/mount=[1-9]/);
    expect(result.stdout).toContain("syscall=-1");
    expect(result.stdout).toMatch(/touch=[1-9]/);
    expect((await fs.readdir(workspace)).sort()).toEqual(["README.md"]);
  });

  it("cannot raise its limits", async () => {
    const result = await confined(
      "ulimit -Hn $(( $(ulimit -Hn) + 1 )) 2>&1; echo nofile=$?; ulimit -Hv unlimited 2>&1; echo as=$?; ulimit -Ht unlimited 2>&1; echo cpu=$?; ulimit -Hn; ulimit -Hv",
    );
    expect(result.stdout).toMatch(/nofile=[1-9]/);
    expect(result.stdout).toMatch(/as=[1-9]/);
    expect(result.stdout).toMatch(/cpu=[1-9]/);
    expect(result.stdout).toContain(String(SANDBOX_LIMITS.openFiles));
    expect(result.stdout).toContain(String(SANDBOX_LIMITS.addressSpaceBytes / 1024));
  });

  it("cannot fork past its process limit", async () => {
    // The kernel exempts uid 0 from RLIMIT_NPROC, and outside its user namespace the command is
    // root: the limit holds through the pids cgroup, which CI (root in a container) can write.
    if (process.env.CI) expect(sandboxStatus().processLimit).toBe("cgroup");
    if (sandboxStatus().processLimit !== "cgroup") return;
    const over = SANDBOX_LIMITS.processes + 50;
    const result = await confined(
      `perl -e 'my $n = 0; for (1..$ARGV[0]) { my $p = fork(); last unless defined $p; if (!$p) { close STDOUT; close STDERR; sleep 5; exit 0 } $n++ } print "forked=$n\n"' ${over}`,
    );
    const forked = Number(/forked=(\d+)/.exec(result.stdout)?.[1]);
    expect(forked).toBeGreaterThan(0);
    expect(forked).toBeLessThan(SANDBOX_LIMITS.processes);
  });

  it("keeps a command's cgroup while another command is prepared before the first one starts", () => {
    if (process.env.CI) expect(sandboxStatus().processLimit).toBe("cgroup");
    if (sandboxStatus().processLimit !== "cgroup") return;
    const options = { workspace, cwd: workspace, env: { PATH: "/usr/bin:/bin" } };
    // Two steps starting together: the second's preparation must not remove the first's cgroup,
    // still empty until the first command's shell joins it.
    const first = sandboxed(["sh", "-c", "echo first"], options);
    const second = sandboxed(["sh", "-c", "echo second"], options);
    for (const [prepared, word] of [
      [first, "first"],
      [second, "second"],
    ] as const) {
      const run = spawnSync(prepared.command, prepared.args, { encoding: "utf8" });
      expect(run.stderr).toBe("");
      expect({ status: run.status, stdout: run.stdout.trim() }).toEqual({ status: 0, stdout: word });
    }
  });

  it("cannot exhaust memory", async () => {
    const bytes = SANDBOX_LIMITS.addressSpaceBytes + 512 * 1024 ** 2;
    const result = await confined(
      `perl -e 'my $s = "x" x $ARGV[0]; print "allocated\n"' ${bytes} 2>&1; echo "exit=$?"`,
    );
    expect(result.stdout).not.toContain("allocated");
    expect(result.stdout).toMatch(/exit=[1-9]/);
  });

  it("cannot write a file past its size limit in its private /tmp", async () => {
    const result = await confined(
      `head -c ${SANDBOX_LIMITS.fileSizeBytes + 1024} /dev/zero > /tmp/big 2>&1; echo "exit=$?"; stat -c %s /tmp/big`,
    );
    expect(result.stdout).toMatch(/exit=[1-9]/);
    expect(result.stdout).toContain(String(SANDBOX_LIMITS.fileSizeBytes));
  });

  it("stops an unapproved command at its wall time, whatever the step's timeout", async () => {
    const result = await runShell(
      "ulimit -Ht; sleep 30; echo late",
      workspace,
      createToolContext(workspace),
      {},
      {
        workspace,
        wallSeconds: 1,
      },
    );
    expect(result.stdout).not.toContain("late");
    expect(result.exitCode).not.toBe(0);
    // And the CPU limit of an unapproved command.
    expect(result.stdout.split("\n")[0]).toBe(String(SANDBOX_LIMITS.cpuSeconds));
  });

  it("cuts output beyond its byte limit", async () => {
    const result = await runShell("yes", workspace, createToolContext(workspace), {}, { workspace, wallSeconds: 30 });
    // The capped result keeps head and tail; the command ended by itself, not by the wall time.
    expect(result.truncated).toBe(true);
    expect(result.exitCode).toBe(141);
  });

  it("is killed at its time limit", async () => {
    const controller = new AbortController();
    const started = runShell("sleep 30", workspace, createToolContext(workspace, controller.signal), {}, { workspace });
    setTimeout(() => controller.abort(new Error("timed out")), 300);
    await expect(started).rejects.toThrow("timed out");
  });
});

describe("without a sandbox", () => {
  it("every shell command needs approval, read-only or not", () => {
    const before = process.env.STEPWISE_SANDBOX;
    process.env.STEPWISE_SANDBOX = "off";
    try {
      expect(shellTool.requiresApprovalFor!({ command: "ls" })).toBe(true);
      expect(shellTool.requiresApprovalFor!({ command: "cat README.md" })).toBe(true);
    } finally {
      if (before === undefined) delete process.env.STEPWISE_SANDBOX;
      else process.env.STEPWISE_SANDBOX = before;
    }
    if (sandboxAvailable()) expect(shellTool.requiresApprovalFor!({ command: "ls" })).toBe(false);
  });
});

describe("on a worker without a sandbox", () => {
  const withoutSandbox = async (check: () => Promise<void> | void) => {
    const before = process.env.STEPWISE_SANDBOX;
    process.env.STEPWISE_SANDBOX = "off";
    try {
      await check();
    } finally {
      if (before === undefined) delete process.env.STEPWISE_SANDBOX;
      else process.env.STEPWISE_SANDBOX = before;
    }
  };

  it("git reads need approval too, and the tools say why a step cannot run unapproved here", () =>
    withoutSandbox(() => {
      expect(gitStatusTool.requiresApprovalFor!({})).toBe(true);
      expect(gitStatusTool.unapprovedRunRefusal!({})).toMatch(/cannot confine git/);
      expect(shellTool.unapprovedRunRefusal!({ command: "ls" })).toMatch(/cannot confine read-only commands/);
      // Not read-only: ungated only by a person's waiver, which stands.
      expect(shellTool.unapprovedRunRefusal!({ command: "rm -rf build" })).toBeUndefined();
      expect(describeSandbox()).toMatchObject({ enabled: false, holds: false, reason: expect.stringMatching(/off/) });
    }));

  it("an unapproved read-only command is refused rather than run unconfined; an approved one runs", () =>
    withoutSandbox(async () => {
      const refused = await rejectionOf(runTool(shellTool, { command: "cat README.md" }, createToolContext(workspace)));
      expect(refused.message).toMatch(/Not run without approval/);
      const approved = await runTool(
        shellTool,
        { command: "cat README.md" },
        { ...createToolContext(workspace), approvedByPerson: true },
      );
      expect(approved.stdout).toBe("# readme\n");
    }));
});
