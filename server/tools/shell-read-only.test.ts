import { describe, expect, it } from "vitest";
import sh from "mvdan-sh";
import { analyzeShellCommand, isReadOnlyCommand } from "./shell-read-only";
import { nodeType } from "./shell-syntax";

describe("isReadOnlyCommand", () => {
  it.each([
    "ls",
    "ls -la",
    "ls -la src/",
    "cat package.json",
    "cat 'a file; with semicolon.txt'",
    'grep -rn "TODO;" src',
    "grep -rn 'rm -rf /' docs",
    "rg --json -n TODO src",
    "find . -name '*.ts' -type f",
    "find src -maxdepth 2 -newer package.json",
    "git status",
    "git status --porcelain",
    "git diff HEAD~1 -- src",
    "git --no-pager log --oneline -n 5",
    "git show HEAD:README.md",
    "git branch --show-current",
    "git branch",
    "git stash list",
    "wc -l src/*.ts",
    "head -n 20 README.md",
    "tail -5 log.txt",
    "ls | wc -l",
    "cat a.txt | sort | uniq -c | sort -rn | head",
    "git status && git diff --stat",
    "ls nonexistent || echo missing",
    "ls; pwd",
    "ls\npwd",
    "cd src && ls",
    "( cd src && ls )",
    "{ ls; pwd; }",
    "ls 2>/dev/null",
    "ls >/dev/null 2>&1",
    "ls &>/dev/null",
    "grep x file 2>&1 | head",
    "cat < input.txt",
    "cat <<EOF\nliteral text\nEOF",
    "grep -c x <<< 'some text'",
    "echo $HOME",
    'echo "${HOME}/x"',
    "if [ -f package.json ]; then cat package.json; fi",
    "[[ -d src ]] && ls src",
    "! grep -q secret .env",
    "date +%s",
    "sort -r names.txt",
    "uniq -c counts.txt",
    "jq .name package.json",
    "diff -u a.txt b.txt",
  ])("%j is read-only", (command) => {
    expect(analyzeShellCommand(command)).toEqual({ readOnly: true });
  });

  it.each([
    // Several commands: each must be read-only.
    ["ls; rm -rf x", "rm is not on the read-only command list"],
    ["ls && rm -rf build", "rm is not"],
    ["ls || rm -rf build", "rm is not"],
    ["ls | xargs rm", "xargs is not"],
    ["ls\nrm x", "rm is not"],
    ["rm -rf build", "rm is not"],
    ["touch x", "touch is not"],
    ["mkdir -p out", "mkdir is not"],
    ["npm install", "npm is not"],
    ["sh -c 'ls'", "sh is not"],
    ["bash -c ls", "bash is not"],
    ["eval ls", "eval is not"],
    ["env rm x", "env is not"],
    ["sudo ls", "sudo is not"],
    ["sed -i s/a/b/ f", "sed is not"],
    ["tee out.txt", "tee is not"],
    // Redirections that write.
    ["cat a > b", "redirects output to b"],
    ["echo hi >> log.txt", "redirects output to log.txt"],
    ["ls 2> errors.txt", "redirects output to errors.txt"],
    ["ls &> all.txt", "redirects output to all.txt"],
    ["ls >| forced.txt", "redirects output to forced.txt"],
    ["ls >&out.txt", "redirects output to out.txt"],
    ["cat <> file", "redirection <>"],
    ["ls > /dev/null.txt", "redirects output to /dev/null.txt"],
    ['ls > "$HOME/x"', "redirects output"],
    ["( ls > out.txt )", "redirects output to out.txt"],
    ["{ ls; } > out.txt", "redirects output to out.txt"],
    // Substitutions run commands wherever they appear.
    ["echo $(rm x)", "command substitution"],
    ["echo `rm x`", "command substitution"],
    ['echo "$(rm x)"', "command substitution"],
    ["ls $(echo .)", "command substitution"],
    ["cat <(rm x)", "process substitution"],
    ["cat <<EOF\n$(rm x)\nEOF", "command substitution"],
    ["echo ${x:-$(rm y)}", "parameter expansion"],
    ["echo ${x:=y}", "parameter expansion"],
    ["echo $((x=5))", "ArithmExp"],
    // Subshells and blocks are checked inside.
    ["(rm -rf x)", "rm is not"],
    ["{ rm x; }", "rm is not"],
    ["if true; then rm x; fi", "rm is not"],
    // Options that turn read-only commands into writers or runners.
    ["find . -delete", "-delete"],
    ["find . -name '*.tmp' -delete", "-delete"],
    ["find . -exec rm {} ;", "-exec"],
    ["find . -execdir rm {} +", "-execdir"],
    ["find . -fprint out.txt", "-fprint"],
    ["find . '-delete'", "-delete"],
    ["find . -del'ete'", "-delete"],
    ["find . -dele\\te", "not literal"],
    ["find . $ACTION", "not literal"],
    ["find . -de*", "not literal"],
    ["git commit -m x", "git commit is not a read-only git command"],
    ["git push", "git push is not"],
    ["git checkout -- .", "git checkout is not"],
    ["git reset --hard", "git reset is not"],
    ["git -c core.pager=rm log", "git option -c"],
    ["git -C /tmp status", "git option -C"],
    ["git diff --output=patch.txt", "--output=patch.txt"],
    ["git log --ext-diff", "--ext-diff"],
    ["git grep -Orm x", "-Orm"],
    ["git branch new-feature", "can modify the repository"],
    ["git branch -D main", "can modify the repository"],
    ["git tag v1", "can modify the repository"],
    ["git stash", "git stash"],
    ["git stash pop", "can modify the repository"],
    ["rg --pre ./run.sh x", "--pre"],
    ["sort -o out.txt in.txt", "-o"],
    ["sort -ro out.txt in.txt", "-ro"],
    ["sort --output=out.txt in.txt", "--output=out.txt"],
    ["date -s 2020-01-01", "-s"],
    ["uniq in.txt out.txt", "out.txt"],
    ["tree -o out.txt", "-o"],
    // Command names must be literal and on the list.
    ["'rm' -rf x", "rm is not"],
    ['"rm" -rf x', "rm is not"],
    ["r\\m -rf x", "not literal"],
    ["$'\\x72m' -rf x", "not literal"],
    ["$CMD x", "not literal"],
    ["/bin/rm x", "/bin/rm is not"],
    ["./ls", "./ls is not"],
    // Other constructs.
    ["x=1", "assigns variables"],
    ["FOO=1 ls", "assigns variables"],
    ["GIT_EXTERNAL_DIFF=./x git diff", "assigns variables"],
    ["export X=1", "assigns variables"],
    ["ls() { rm -rf x; }; ls", "defines a function"],
    ["ls &", "background job"],
    ["for f in *; do cat $f; done", "ForClause"],
    ["while true; do ls; done", "WhileClause"],
    ["time ls", "TimeClause"],
    ["ls @(a|b)", "ExtGlob"],
    ["case x in x) rm y;; esac", "CaseClause"],
    // Comments, line continuations and newlines: what the parser and bash could read differently.
    ["ls # ; rm -rf x", "comment"],
    ["echo #\\\ntouch x", "comment"],
    ["ls\necho #\\\ntouch x", "comment"],
    ["ls\necho '#'\\\ntouch x", "backslash-newline"],
    ["ls\nrm x", "line 2: rm is not"],
    ["echo a \\\ntouch x", "backslash-newline"],
    ["echo 'a\nb'", "spans lines"],
    ["ls\r\ntouch x", "control character"],
    ["cat <<EOF\n$HOME\nEOF", "expands its body"],
    ["cat <<'EOF'\nx\nEOF\nls", "follows the here-document"],
    ["cat <<'EOF'\nx\n EOF", "could not be parsed"],
    ["cat <<'A' <<'B'\nx\nA\ny\nB", "more than one here-document"],
    // Degenerate input.
    ["", "empty"],
    ["   \n  ", "empty"],
    ["ls (((", "could not be parsed"],
    ["echo 'unterminated", "could not be parsed"],
  ])("%j is not read-only (%s)", (command, reason) => {
    const verdict = analyzeShellCommand(command);
    expect(verdict.readOnly).toBe(false);
    expect(verdict.readOnly ? "" : verdict.reason).toContain(reason);
  });

  it("decides by syntax, not by substrings", () => {
    // A quoted `;` or `>` is an argument, not an operator.
    expect(isReadOnlyCommand("grep ';' file")).toBe(true);
    expect(isReadOnlyCommand("echo 'a > b'")).toBe(true);
    expect(isReadOnlyCommand('echo "rm -rf /; $(ls)"')).toBe(false); // the substitution runs
    expect(isReadOnlyCommand("echo 'rm -rf /; $(ls)'")).toBe(true); // single quotes: plain text
    // A read-only command name inside an argument does not make a writer read-only.
    expect(isReadOnlyCommand("rm ls")).toBe(false);
    // A comment needs approval: mvdan/sh and bash can disagree about where one ends.
    expect(analyzeShellCommand("ls # > out.txt")).toEqual({
      readOnly: false,
      reason: expect.stringContaining("comment"),
    });
  });

  it("does not treat inherited object keys as command names", () => {
    expect(isReadOnlyCommand("constructor")).toBe(false);
    expect(isReadOnlyCommand("toString")).toBe(false);
    expect(isReadOnlyCommand("__proto__")).toBe(false);
  });
});

describe("literal arguments of commands with writing options", () => {
  it.each([
    ["git show HEAD@{1}", true],
    ["git log HEAD~3..HEAD", true],
    ["find . -name x -[d]elete", false],
    ["find . -{delete,print}", false],
    ["find . -de'l'*", false],
    ["find ~ -name x", false],
    ["find . -name '*.ts'", true],
    ["find . -name \\*.ts", false],
  ])("%j → read-only %s", (command, expected) => {
    expect(isReadOnlyCommand(command)).toBe(expected);
  });
});

describe("nodeType", () => {
  it("names every node as the parser's own NodeType does", () => {
    const file = sh.syntax
      .NewParser()
      .Parse(
        "if [[ -f a ]]; then cat <<EOF | grep \"x$HOME\" 2>&1 > out; fi\n$(rm x)\nEOF\n( ls ) && { echo 'q' $'d'; }; f() { :; }; x=1 ls &",
        "",
      );
    let count = 0;
    sh.syntax.Walk(file, (node) => {
      if (node) {
        count++;
        expect(nodeType(node)).toBe(sh.syntax.NodeType(node));
      }
      return true;
    });
    expect(count).toBeGreaterThan(30);
  });
});
