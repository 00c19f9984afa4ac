import { viaOperation } from "../../operations/operation";
import {
  templateDelete,
  templateDetect,
  templateGet,
  templateInstantiate,
  templateList,
  templateSave,
} from "../../operations/templates";
import { publicProcedure, router } from "../init";

/** Plan templates for the browser: each procedure is the operation of the same name. */
export const templatesRouter = router({
  detect: publicProcedure.input(templateDetect.input).query(viaOperation(templateDetect)),
  save: publicProcedure.input(templateSave.input).mutation(viaOperation(templateSave)),
  list: publicProcedure.input(templateList.input).query(viaOperation(templateList)),
  get: publicProcedure.input(templateGet.input).query(viaOperation(templateGet)),
  instantiate: publicProcedure.input(templateInstantiate.input).mutation(viaOperation(templateInstantiate)),
  delete: publicProcedure.input(templateDelete.input).mutation(viaOperation(templateDelete)),
});
